import EventLoop
import LoadCore
import SeededRandom
import Web

/// Sizes of a catch-up run (C1).
public struct CatchUpOptions: Sendable {
  /// The device's offline pages.
  public var pages = 10_000
  /// Percent of them changed while the device was away.
  public var changedPercent = 1.0

  public init() {}
}

/// C1: a device with `pages` offline pages goes away, `changedPercent` of them change, and it comes back:
/// subscribe all (as a device must before catching up), one catch-up request, fetch the changed pages. Checks
/// that the catch-up reports exactly the changed pages at their new times, and measures requests, bytes and the
/// time until the device is fresh.
///
/// Threading: the run's loop only.
final class CatchUpRun: ScenarioRun {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let options: CatchUpOptions
  private let server: ServerProbe
  private let progress: ProgressLine
  private let nonce: String
  private let seed: UInt64
  private let writers: BrokerWriterPool
  private let pages: RunPages
  private var known: [String: UInt64] = [:]
  private var epoch = ""
  private var expected: [String: UInt64] = [:]
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?
  private var device: DeviceStream?
  private var connection: HTTPClientConnection?

  init(
    loop: Loop, endpoint: BrokerEndpoint, options: CatchUpOptions, server: ServerProbe,
    progress: ProgressLine,
    nonce: String, seed: UInt64
  ) {
    self.loop = loop
    self.endpoint = endpoint
    self.options = options
    self.server = server
    self.progress = progress
    self.nonce = nonce
    self.seed = seed
    writers = BrokerWriterPool(endpoint: endpoint)
    pages = RunPages(prefix: "load-c1-\(nonce)", count: options.pages)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    progress.update("pagesync C1: creating \(options.pages) pages")
    writers.open(loop: loop, count: 1, clientPrefix: "load-\(nonce)-c1", creating: pages, title: "C1") {
      [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let (times, epoch)):
        // The device downloaded every page: it knows each at the time the create gave it.
        known = Dictionary(uniqueKeysWithValues: zip(pages.ids, times))
        self.epoch = epoch
        changeSome()
      }
    }
  }

  /// While the device is away: change the chosen pages in one batch (or as few as the batch limit allows).
  private func changeSome() {
    var generator = SplitMix64(seed: seed)
    let count = min(options.pages, Int((Double(options.pages) * options.changedPercent / 100).rounded()))
    let chosen = generator.choose(count, of: options.pages).map(pages.id)
    let edits = chosen.map { MutationFields.setTitle(page: $0, time: writers.nextTime(), title: "changed") }
    BatchChunks.send(edits, chunk: 1000, through: writers) { [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let answer):
        expected = answer.pages
        guard Set(expected.keys) == Set(chosen) else {
          return finish(
            .failure(.setupFailed("the edit batch changed \(expected.count) of \(chosen.count) pages")))
        }
        endpoint.connectHTTP(loop: loop) { result in
          switch result {
          case .failure(let error): self.finish(.failure(.connectFailed("\(error)")))
          case .success(let connection):
            self.connection = connection
            self.comeBack(connection)
          }
        }
      }
    }
  }

  /// The device returns: subscribe everything, one catch-up, fetch what changed. Timed from the first byte.
  private func comeBack(_ connection: HTTPClientConnection) {
    let window = MeasurementWindow(server: server)
    let started = window.startedAt
    let device = DeviceStream()
    self.device = device
    // The device only needs the subscription in place before it catches up: its notifications are not used.
    device.open(loop: loop, endpoint: endpoint, pages: pages.ids) { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      let subscribedAt = HostProcess.now()
      let request = CatchUp.requestBody(epoch: epoch, times: known.map { ($0.key, $0.value) })
      endpoint.post(connection, "/v1/catchup", body: request) { result in
        let caughtUpAt = HostProcess.now()
        let catchUpBytes = connection.bytesRead + connection.bytesWritten
        switch result {
        case .failure(let error): self.finish(.failure(error))
        case .success(let object):
          let answer = CatchUp.Answer(object)
          let changed = answer.changed
          self.fetch(connection, changed: changed, cursor: nil, deltas: 0, requests: 0) { fetched in
            let freshAt = HostProcess.now()
            let totalBytes = connection.bytesRead + connection.bytesWritten
            let check = CatchUpCheck(expected: self.expected, reported: changed)
            let exact = answer.isExact(check)
            func ms(_ from: UInt64, _ to: UInt64) -> ReportValue { .number(Double(to - from) / 1e6) }
            let report = ReportValue.object(
              [
                ("scenario", .string("C1")), ("target", .string("pagesync")),
                ("pages", .int(self.options.pages)),
                ("changed_expected", .int(self.expected.count)), ("changed_reported", .int(changed.count)),
                ("missing", .int(check.missing)), ("extra", .int(check.needless)),
                ("wrong_time", .int(check.wrongTime)),
                ("gone", .int(answer.gone)), ("exact", .bool(exact)), ("catchup_requests", .int(1)),
                ("fetch_requests", .int(fetched.requests)), ("deltas_fetched", .int(fetched.deltas)),
                (
                  "bytes",
                  .object([
                    ("timestamp_map", .int(request.utf8.count)), ("catchup_wire", .int(catchUpBytes)),
                    ("fetch_wire", .int(totalBytes - catchUpBytes)),
                    ("fetch_bodies", .int(fetched.bodyBytes)),
                    ("total_wire", .int(totalBytes + device.bytesSent + device.bytesReceived)),
                    (
                      "over_ideal",
                      .number(Double(totalBytes) / Double(max(request.utf8.count + fetched.bodyBytes, 1)))
                    ),
                  ])
                ),
                (
                  "time",
                  .object([
                    ("subscribe_ms", ms(started, subscribedAt)), ("catchup_ms", ms(subscribedAt, caughtUpAt)),
                    ("fetch_ms", ms(caughtUpAt, freshAt)), ("to_fresh_ms", ms(started, freshAt)),
                  ])
                ),
              ] + window.serverAndMachine(now: freshAt) + [
                ("ok", .bool(exact && fetched.deltas == self.expected.count))
              ])
            self.finish(.success(report))
          }
        }
      }
    }
  }

  private struct Fetched {
    var requests: Int
    var deltas: Int
    var bodyBytes: Int
  }

  /// Fetches the deltas of `changed` since the device's times, following `nextCursor`.
  private func fetch(
    _ connection: HTTPClientConnection, changed: [String: UInt64], cursor: String?, deltas: Int,
    requests: Int,
    bodyBytes: Int = 0, _ done: @escaping (Fetched) -> Void
  ) {
    guard !changed.isEmpty else { return done(Fetched(requests: 0, deltas: 0, bodyBytes: 0)) }
    let since = changed.keys.map { "\"\($0)\":\(known[$0] ?? 0)" }.joined(separator: ",")
    let cursorJSON = cursor.map { "\"\($0)\"" } ?? "null"
    let body = #"{"epoch":"\#(epoch)","pages":{\#(since)},"limit":1000,"cursor":\#(cursorJSON)}"#
    let before = connection.bytesRead
    endpoint.post(connection, "/v1/fetch", body: body) { [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let answer):
        let count = deltas + ((answer["deltas"] as? [Any])?.count ?? 0)
        let bytes = bodyBytes + (connection.bytesRead - before)
        if let next = answer["nextCursor"] as? String {
          fetch(
            connection, changed: changed, cursor: next, deltas: count, requests: requests + 1,
            bodyBytes: bytes,
            done)
        } else {
          done(Fetched(requests: requests + 1, deltas: count, bodyBytes: bytes))
        }
      }
    }
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    progress.clear()
    writers.close()
    device?.drop()
    connection?.close()
    completion(result)
  }
}
