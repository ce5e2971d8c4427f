import Testing
import Web

@testable import Broker

#if canImport(Glibc)
  import Glibc
#endif

/// `GET /status` in-process (`BrokerHarness`): the page's figures against `/metrics`' at the same moment, its
/// rates, its escaping, and what it must never show.
@Suite struct BrokerStatusPageTests {
  // MARK: Reading the page and the exposition

  /// The `data-metric` → `data-value` pairs of a page (the figures it says `/metrics` also has).
  private func figures(_ page: String) -> [String: Double] {
    var found: [String: Double] = [:]
    var rest = page[...]
    while let start = rest.firstRange(of: "data-metric=\"") {
      rest = rest[start.upperBound...]
      guard let end = rest.firstIndex(of: "\"") else { break }
      let metric = unescape(String(rest[..<end]))
      rest = rest[end...]
      guard rest.hasPrefix("\" data-value=\"") else { continue }
      rest = rest.dropFirst("\" data-value=\"".count)
      guard let valueEnd = rest.firstIndex(of: "\"") else { break }
      found[metric] = Double(rest[..<valueEnd])
      rest = rest[valueEnd...]
    }
    return found
  }

  private func unescape(_ text: String) -> String {
    text.replacing("&quot;", with: "\"").replacing("&lt;", with: "<").replacing("&gt;", with: ">")
      .replacing("&#39;", with: "'").replacing("&amp;", with: "&")
  }

  /// `name{labels}` → value of a Prometheus text exposition.
  private func samples(_ text: String) -> [String: Double] {
    var samples: [String: Double] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      let space = line.lastIndex(of: " ")!
      samples[String(line[..<space])] = Double(line[line.index(after: space)...])
    }
    return samples
  }

  /// The status page and the exposition, read in one loop turn (nothing can change between them).
  private func pageAndMetrics(_ harness: BrokerHarness) throws -> (page: String, metrics: [String: Double]) {
    let page = harness.send(.GET, "/status", token: nil)
    let metrics = harness.send(.GET, "/metrics", token: nil)
    let pageResponse = try #require(page.response, "/status answers on the loop, at once")
    let metricsResponse = try #require(metrics.response)
    return (pageResponse.body.readableString, samples(metricsResponse.body.readableString))
  }

  /// The text of the `<td data-key="KEY">` of the configuration table.
  private func configured(_ key: String, in page: String) -> String? {
    guard let start = page.firstRange(of: "<td data-key=\"\(key)\">") else { return nil }
    let rest = page[start.upperBound...]
    return rest.firstRange(of: "</td>").map { String(rest[..<$0.lowerBound]) }
  }

  // MARK: Figures

  @Test func everyFigureIsTheOneMetricsExportsAtTheSameMoment() throws {
    try withBroker { harness in
      let socket = try harness.openStream()
      _ = try harness.subscribe(socket, ["home", "other"])
      try harness.commit(client: "c1", [.create("home", title: "Home")])
      try harness.commit(client: "c1", [.setTitle("home", "Home 2"), .setTitle("home", "Home 3")])
      try harness.waitForFrames(socket, count: 2)
      let (page, metrics) = try pageAndMetrics(harness)
      let shown = figures(page)
      // What this test did is on the page, with the values it must have.
      #expect(shown["pagesync_broker_device_streams"] == 1)
      #expect(shown["pagesync_broker_subscriptions"] == 2)
      #expect(shown["pagesync_broker_batches_applied_total"] == 2)
      #expect(shown["pagesync_broker_batch_commit_seconds_count"] == 2)
      // Each committed batch's time in the writer, by phase (not on the page).
      for phase in WriterPhaseTally.phases {
        #expect(metrics["pagesync_broker_writer_phase_seconds_count{phase=\"\(phase)\"}"] == 2, "\(phase)")
      }
      #expect(shown["pagesync_broker_notifications_sent_total"] ?? 0 >= 1)
      #expect(shown["pagesync_broker_writer_jobs"] == 0)
      #expect(shown["pagesync_broker_store_bytes"] ?? 0 > 0, "the store file has pages")
      #expect(shown["pagesync_broker_start_time_seconds"] == harness.broker.startTimeSeconds)
      // And every figure the page shows is the exposition's, to the unit.
      #expect(shown.count >= 15)
      for (metric, value) in shown {
        #expect(
          metrics[metric] == value, "\(metric): the page shows \(value), /metrics \(metrics[metric] ?? -1)")
      }
      #expect(page.contains(#"data-metric="pagesync_broker_subscriptions" data-value="2">2</p>"#))
    }
  }

  /// The store's checkpoints run on the broker's checkpointer, not in the writer's commits, and `/metrics` counts
  /// them by who ran them.
  @Test func checkpointsRunOffTheWriterAndAreCounted() throws {
    let few: (inout BrokerConfiguration) -> Void = { $0.checkpointPages = 100 }
    try withBroker(configure: few) { harness in
      let checkpointer = try #require(harness.broker.checkpointer)
      try harness.commit(client: "c1", [.create("home", title: "Home")])
      // Each batch its own commit, a few log pages each: several hundred pages, past 100 many times.
      for index in 0..<200 {
        try harness.commit(
          client: "c1", [.setTitle("home", "Home \(index) ")])
      }
      try harness.run(until: { checkpointer.checkpointsByCheckpointer >= 2 })
      let (_, metrics) = try pageAndMetrics(harness)
      let counted = metrics["pagesync_broker_store_checkpoints_total{by=\"checkpointer\"}"] ?? 0
      #expect(counted >= 2 && counted <= Double(checkpointer.checkpointsByCheckpointer))
      #expect(
        metrics["pagesync_broker_store_checkpoints_total{by=\"writer\"}"]
          == Double(checkpointer.checkpointsByWriter))
      #expect(checkpointer.pagesCopiedByCheckpointer > checkpointer.pagesCopiedByWriter)
    }
    // Without it, SQLite's own checkpoint runs in the writer's commits: no checkpointer.
    let off: (inout BrokerConfiguration) -> Void = { $0.checkpointer = false }
    try withBroker(configure: off) { harness in
      #expect(harness.broker.checkpointer == nil)
      try harness.commit(client: "c1", [.create("home", title: "Home")])
    }
  }

  @Test func ratesAreTheGrowthOverTheSampleWindow() throws {
    try withBroker { harness in
      let broker = harness.broker
      // The window as the test samples it: the loop's timer stopped, one sample at a time the test picks.
      broker.statusTimer?.stop()
      broker.statusWindow = CounterWindow(span: BrokerServer.statusWindowSpan, capacity: 12)
      let start = harness.loop.now
      broker.statusWindow.record(broker.statusCounters, at: start)
      for title in ["a", "b", "c"] {
        try harness.commit(client: "c1", [.create("page-\(title)", title: title)])
      }
      let snapshot = broker.statusSnapshot(now: start + 2000)
      let rates = try #require(snapshot.rates)
      #expect(rates.seconds == 2)
      #expect(rates.batchesPerSecond == 1.5)
      #expect(rates.commits.count == 3)
      let page = StatusPage.render(snapshot)
      #expect(page.contains(#"<p class="big" data-rate="batches" data-value="1.5">1.5/s</p>"#))
      #expect(page.contains(#"<span data-commit="count">3</span> commits, last 2.0 s"#))
      // Past the window, with no sample since: no rate is made up.
      let late = StatusPage.render(broker.statusSnapshot(now: start + BrokerServer.statusWindowSpan + 1))
      #expect(late.contains(#"<p class="big" data-rate="batches">–</p>"#))
    }
  }

  /// The window is fed by a timer on the loop: a sample at start, then one a second (the wait ends when the
  /// sample is there, not after a sleep). The harness's `shutDown` closes the loop, which proves the timer
  /// was closed with the broker.
  @Test func theLoopSamplesTheCountersEverySecond() throws {
    try withBroker { harness in
      let window = { harness.broker.statusWindow.samples }
      #expect(window().count == 1, "a sample at start")
      try harness.commit(client: "c1", [.create("home", title: "Home")])
      try harness.run(until: { window().count == 2 }, timeout: 5000)
      let (first, second) = (window()[0], window()[1])
      #expect(second.time - first.time >= BrokerServer.statusSampleInterval)
      #expect(first.counters.batchesApplied == 0 && second.counters.batchesApplied == 1)
      #expect(second.counters.commits.count == 1)
    }
  }

  @Test func theWriterQueueCountsJobsNotAnsweredYet() throws {
    try withBroker { harness in
      // Submitted and not answered: their completions run on the loop, which has not turned since.
      let pending = (1...3).map { harness.pushBatch(client: "c\($0)", [.create("p\($0)", title: "x")]) }
      var (page, metrics) = try pageAndMetrics(harness)
      #expect(figures(page)["pagesync_broker_writer_jobs"] == 3)
      #expect(metrics["pagesync_broker_writer_jobs"] == 3)
      try harness.run(until: { pending.allSatisfy { $0.response != nil } })
      (page, metrics) = try pageAndMetrics(harness)
      #expect(figures(page)["pagesync_broker_writer_jobs"] == 0)
    }
  }

  @Test func commitLatencyCountsTheCommitsTheHistogramCounts() {
    let metrics = BrokerMetrics()
    var random = SystemRandomNumberGenerator()
    // On every bound and between them, and beyond the largest.
    var durations = BrokerMetrics.commitBuckets + [.seconds(30)]
    for _ in 0..<200 { durations.append(.microseconds(Int64.random(in: 1...6_000_000, using: &random))) }
    for duration in durations { metrics.batchCommitted(after: duration) }
    let exposition = samples(String(decoding: metrics.exposition(BrokerMetrics.Figures()), as: UTF8.self))
    let tally = metrics.commits
    #expect(exposition["pagesync_broker_batch_commit_seconds_count"] == Double(tally.count))
    let sum = exposition["pagesync_broker_batch_commit_seconds_sum"] ?? -1
    #expect(
      abs(sum - Double(tally.total.components.seconds) - Double(tally.total.components.attoseconds) / 1e18)
        < 1e-6)
    let prefix = "pagesync_broker_batch_commit_seconds_bucket{le=\""
    for (bound, count) in zip(tally.bounds, tally.cumulative) {
      let le = Double(bound.components.seconds) + Double(bound.components.attoseconds) / 1e18
      let line = exposition.first { key, _ in
        key.hasPrefix(prefix) && Double(key.dropFirst(prefix.count).dropLast(2)) == le
      }
      #expect(line?.value == Double(count), "bucket \(le): histogram \(line?.value ?? -1), tally \(count)")
    }
  }

  // MARK: What the page must not show, and how it shows what it does

  @Test func noTokenUserOrWorkspaceAppears() throws {
    let secret = "a-secret-token-value-that-must-not-leak-9f3c"
    let addSecret = { (configuration: inout BrokerConfiguration) in
      configuration.tokens.append(TokenGrant(token: secret, user: id("zelda"), workspaces: [id("vault")]))
    }
    try withBroker(configure: addSecret) { harness in
      let (page, _) = try pageAndMetrics(harness)
      #expect(!page.contains(secret))
      for grant in harness.broker.configuration.tokens {
        #expect(!page.contains(grant.token), "a token on the page")
        #expect(!page.contains(grant.user.rawValue), "user \(grant.user) on the page")
        for workspace in grant.workspaces {
          #expect(!page.contains(workspace.rawValue), "workspace \(workspace)")
        }
      }
      #expect(
        configured("auth.tokens", in: page) == "4 tokens for 4 users (tokens, users and workspaces not shown)"
      )
    }
  }

  @Test func aHostileStorePathIsShownAsTextNotMarkup() throws {
    let directory = "/tmp/pagesync-status-<b>\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    #expect(mkdir(directory, 0o700) == 0)
    // (No `</script>`: a file name holds no slash.)
    let path = directory + #"/<script>alert('x')&"q".sqlite"#
    defer {
      for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
      rmdir(directory)
    }
    let hostilePath = { (configuration: inout BrokerConfiguration) in configuration.storePath = path }
    try withBroker(configure: hostilePath) { harness in
      let (page, _) = try pageAndMetrics(harness)
      #expect(!page.lowercased().contains("<script"))
      #expect(!page.contains("<b>"))
      #expect(
        configured("store.path", in: page)
          == "&quot;\(HTMLWriter.escape(directory))/&lt;script&gt;alert(&#39;x&#39;)&amp;&quot;q&quot;.sqlite&quot;"
      )
      #expect(HTMLWriter.escape(directory).contains("&lt;b&gt;"))
    }
  }

  /// Whatever the values, the page's markup is only the tags this program writes.
  @Test func hostileValuesInEveryFieldAddNoTag() {
    let hostile = #"<img src=x onerror="alert(1)">'&<!--"#
    var figures = BrokerMetrics.Figures()
    figures.responses.record(401)
    var configuration = BrokerConfiguration()
    configuration.storePath = hostile
    configuration.listen = .unix(path: hostile)
    let page = StatusPage.render(
      StatusPage.Snapshot(
        figures: figures, commits: CommitTally(), rates: nil, windowSeconds: 10, epoch: hostile,
        address: hostile, uptimeMilliseconds: 0, nowSeconds: 0, refreshSeconds: 5,
        configuration: configuration.displayedKeys + [(hostile, hostile)]))
    let allowed: Set<String> = [
      "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "strong",
      "code",
      "main", "section", "div", "span", "table", "tr", "th", "td", "br", "a", "footer",
    ]
    var tags: Set<String> = []
    var rest = page[...]
    while let open = rest.firstIndex(of: "<") {
      rest = rest[rest.index(after: open)...]
      let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "!" || $0 == "/" }
      tags.insert(String(name.drop { $0 == "/" }))
    }
    #expect(tags.isSubset(of: allowed), "\(tags.subtracting(allowed))")
    #expect(!page.contains("onerror=\""))
    #expect(page.contains("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;&lt;!--"))
  }

  /// Every element the page opens it closes, in order (the void ones aside), with rates and without.
  @Test func theMarkupIsBalanced() throws {
    var commits = CommitTally()
    commits.record(.milliseconds(2))
    var figures = BrokerMetrics.Figures()
    figures.responses.record(503)
    let rates = StatusRates(
      seconds: 9.5, batchesPerSecond: 3, notificationsPerSecond: 7, coalescedPerSecond: 1, commits: commits)
    for rates in [rates, nil] {
      let page = StatusPage.render(
        StatusPage.Snapshot(
          figures: figures, commits: commits, rates: rates, windowSeconds: 10, epoch: "e", address: "a",
          uptimeMilliseconds: 1, nowSeconds: 1, refreshSeconds: 5,
          configuration: BrokerConfiguration().displayedKeys))
      var open: [String] = []
      var rest = page[...]
      while let start = rest.firstIndex(of: "<") {
        rest = rest[rest.index(after: start)...]
        let closing = rest.first == "/"
        let name = String(rest.drop { $0 == "/" }.prefix { $0.isLetter || $0.isNumber || $0 == "!" })
        if ["!DOCTYPE", "meta", "br"].contains(name) { continue }
        if closing {
          try #require(open.last == name, "</\(name)> closes <\(open.last ?? "nothing")>")
          open.removeLast()
        } else {
          open.append(name)
        }
      }
      #expect(open.isEmpty, "left open: \(open)")
    }
  }

  @Test func itNeedsNoTokenAnswersHeadAndIsNeverCached() throws {
    try withBroker { harness in
      let response = try harness.request(.GET, "/status", token: nil)
      #expect(response.status == .ok)
      #expect(response.head.headers["Content-Type"] == "text/html; charset=utf-8")
      #expect(response.head.headers["Cache-Control"] == "no-store")
      #expect(response.head.headers["Content-Security-Policy"]?.hasPrefix("default-src 'none'") == true)
      let body = response.body.readableString
      #expect(body.hasPrefix("<!DOCTYPE html>"))
      #expect(body.contains(#"<meta http-equiv="refresh" content="5">"#))
      #expect(!body.contains("<script"), "no script: the page reloads itself with a meta refresh")
      #expect(!body.contains("src="), "no outside asset")
      // HEAD is GET's handler (the server leaves the body out: curl -I in StatusPageBrowserTests).
      let head = try harness.request(.HEAD, "/status", token: nil)
      #expect(head.status == .ok && head.head.headers["Content-Type"] == "text/html; charset=utf-8")
      let post = try harness.request(.POST, "/status", token: nil)
      #expect(post.status == .methodNotAllowed)
      #expect(post.head.headers["Allow"] == "GET, HEAD")
    }
  }

  // MARK: Configuration

  @Test func theConfigurationInForceIsShownAfterAReload() throws {
    try withBroker { harness in
      var (page, _) = try pageAndMetrics(harness)
      #expect(configured("limits.batch_mutations", in: page) == "1000")
      #expect(configured("limits.page_bytes", in: page) == #"16777216<span class="hint"> (16.0 MiB)</span>"#)
      var next = harness.broker.configuration
      next.limits.batchMutations = 7
      next.listen = .inet(host: "127.0.0.1", port: 1)
      harness.broker.reload(next)
      (page, _) = try pageAndMetrics(harness)
      #expect(configured("limits.batch_mutations", in: page) == "7")
      // A key that needs a restart shows its running value.
      #expect(configured("server.listen", in: page) == "&quot;127.0.0.1:7700&quot;")
    }
  }

  @Test func everyKeyOfTheSampleFileIsShown() throws {
    let root = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(
      separator: "/")
    let file = try #require(fopen(root + "/config/pagesync-broker.toml", "r"))
    defer { fclose(file) }
    var documented: [String] = []
    var section = ""
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
      let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      if text.hasPrefix("[") || text.hasPrefix("# [") {
        // A commented header opens an example table ([server.tls]).
        section = String(text.drop { $0 == "#" || $0 == " " || $0 == "[" }.prefix { $0 != "]" })
      } else if text.hasPrefix("# "), let equals = text.firstRange(of: " = "),
        text.dropFirst(2).first?.isLowercase == true
      {
        let key = String(text[text.index(text.startIndex, offsetBy: 2)..<equals.lowerBound])
        // The token example's keys (token, user, workspaces) are one line on the page: auth.tokens; the JWT
        // example's, auth.jwt.
        let jwtKeys = [
          "algorithms", "secret_file", "public_key", "jwks_file", "issuer", "audience", "user_claim",
          "workspaces_claim", "leeway_s",
        ]
        let name =
          ["token", "user", "workspaces"].contains(key)
          ? "auth.tokens" : jwtKeys.contains(key) ? "auth.jwt" : "\(section).\(key)"
        if documented.last != name { documented.append(name) }
      }
    }
    #expect(documented.count > 25)
    #expect(BrokerConfiguration().displayedKeys.map(\.key) == documented)
  }
}
