import ByteBuffers
import EventLoop
import FoundationEssentials
import Web

#if canImport(Glibc)
  import Glibc
#endif

extension BrokerServer {
  /// How far back the status page's rates look, in milliseconds: a sample of the counters is taken each second.
  static let statusWindowSpan: UInt64 = 10_000
  static let statusSampleInterval: UInt64 = 1000
  /// How often the status page reloads itself, in seconds.
  static let statusRefreshSeconds = 5

  /// `GET /status` (and `HEAD`): the status page, built on the loop from the figures `/metrics` exports.
  /// No token, as `/metrics` (docs/operations.md, "Status page").
  func statusResponse() -> HTTPResponse {
    let body = StatusPage.render(statusSnapshot(now: loop.now))
    return HTTPResponse(
      status: .ok,
      headers: [
        "Content-Type": StatusPage.contentType,
        // Figures of one moment: a cache or a back button must not show old ones as current.
        "Cache-Control": "no-store",
        // No script, frame or outside resource, whatever a value on the page held; inline styles only.
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
      ],
      body: ByteBuffer(string: body))
  }

  /// What the status page shows at `now` (the loop's clock, milliseconds).
  func statusSnapshot(now: UInt64) -> StatusPage.Snapshot {
    let figures = metricsFigures
    return StatusPage.Snapshot(
      figures: figures, commits: metrics.commits,
      rates: statusWindow.rates(statusCounters, at: now),
      windowSeconds: Int(Self.statusWindowSpan / 1000), epoch: epoch,
      address: (boundAddress ?? configuration.listen).description,
      uptimeMilliseconds: now &- startedAtLoopTime, nowSeconds: Date().timeIntervalSince1970,
      refreshSeconds: Self.statusRefreshSeconds, configuration: configuration.displayedKeys)
  }

  /// The counters the status page's rates come from: the ones `metricsFigures` reads, and the commits.
  var statusCounters: StatusCounters {
    var counters = StatusCounters()
    counters.batchesApplied = batchesApplied
    counters.notificationsSent = notificationsSent
    counters.notificationsCoalesced = notificationsCoalesced
    counters.commits = metrics.commits
    return counters
  }

  /// Samples the counters now and then every `statusSampleInterval` on the loop (a timer that does not keep
  /// the loop alive; closed by `shutdown`). Each tick also looks whether the broker is idle enough to give
  /// memory back (BrokerServer+Memory.swift), so that needs no timer of its own.
  func startStatusSampling() {
    sampleStatus()
    let timer = LoopTimer(loop: loop)
    timer.keepsLoopAlive = false
    timer.start(after: Self.statusSampleInterval, repeatEvery: Self.statusSampleInterval) {
      [unowned self] in
      self.sampleStatus()
      self.lookForIdleMemory(at: self.loop.now)
    }
    statusTimer = timer
  }

  func sampleStatus() { statusWindow.record(statusCounters, at: loop.now) }

  /// The sizes of the store's database file and its write-ahead log: two `stat` calls on the loop (metadata
  /// only, about a microsecond each); 0 for a file that is not there (an in-memory store, no WAL yet).
  func storeFileSizes() -> (database: Int, wal: Int) {
    func size(_ path: String) -> Int {
      var info = stat()
      return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
    let path = configuration.storePath
    if path.isEmpty || path == ":memory:" || path.hasPrefix("file:") { return (0, 0) }
    return (size(path), size(path + "-wal"))
  }
}
