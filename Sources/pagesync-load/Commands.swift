import ArgumentParser
import LoadCore
import LoadHarness

#if canImport(Glibc)
  import Glibc
#endif

/// Options every scenario takes.
struct CommonOptions: ParsableArguments {
  @Option(help: "URL of a running broker (http://HOST:PORT); without it the harness starts one.")
  var broker: String?

  @Option(help: "Bearer token for --broker.")
  var token: String?

  @Option(help: "Workspace the scenario's pages are created in.")
  var workspace = "default"

  @Option(help: "[store] synchronous of a harness-started broker: full or normal.")
  var synchronous = "full"

  @Flag(help: "Print one JSON object instead of a table.")
  var json = false

  @Option(
    help: """
      Also write the run's plots to this file: one self-contained HTML page (inline SVG, no script, nothing \
      fetched): p99 and throughput by offered rate, latency by percentile, server CPU, the run's notes.
      """)
  var html: String?

  @Option(help: "A name for this build or setup, kept in the report as \"label\" (render draws each apart).")
  var label: String?

  @Flag(help: "A short run (under a minute): for smoke tests and a first look.")
  var quick = false

  @Option(help: "Seed for the scenario's choices (which pages change).")
  var seed: UInt64 = 1

  @Flag(help: "No progress line on stderr.")
  var quiet = false

  @Option(help: "Seconds a run may take in all (start, load, drain, stop) before it fails as timed out.")
  var timeout = 600

  @Flag(
    help: """
      TLS on both sides: the broker with [server.tls] and redis-server with --tls-port, both with a \
      certificate of a CA made for the run (openssl), which every harness connection verifies.
      """)
  var tls = false

  @Option(help: "CA certificates (PEM) to verify an https:// --broker against (default: the system's).")
  var caFile: String?

  var settings: RunSettings {
    var settings = RunSettings()
    settings.brokerURL = broker
    settings.token = token
    settings.workspace = workspace
    settings.synchronous = synchronous
    settings.seed = seed
    settings.progress = !quiet
    settings.timeoutSeconds = timeout
    settings.tls = tls
    settings.caFile = caFile
    return settings
  }
}

/// Every scenario's sizes; each scenario reads the ones it uses (defaults per scenario in the help).
struct Sizes: ParsableArguments {
  @Option(
    help:
      "B1, B2: subscribers (device streams) (default 1000; --quick 200); B5: healthy devices (default 100).")
  var subscribers: Int?

  @Option(
    help:
      "B1, W1, B5: batches per second, open loop (default 1000; B5 500); B2: the first step's (default 250).")
  var rate: Double?

  @Option(help: "B2, B1 --sweep: each step's rate over the previous one's (default 2).")
  var factor = 2.0

  @Option(
    help: """
      B2, B1 --sweep: the highest rate tried (default 1024000; B1 128000; --quick 4000); a sweep stops sooner, \
      at the first step the target does not keep up with.
      """)
  var maxRate: Double?

  @Flag(
    help: """
      B1: rising rates from --rate (default 100 with --sweep), × --factor a step, until the broker stops keeping       up: the highest deliveries/s at p99 ≤ 25 ms, the form of B1's target.
      """)
  var sweep = false

  @Option(
    help: "B1, W1, B5: seconds of writing (default 10; --quick 3); B2: per step (default 5; --quick 2).")
  var seconds: Double?

  @Option(
    help: """
      B1, B2: threads reading the subscribers' sockets (frames parsed, latencies recorded), the same for both \
      systems of compare; the writers' schedule keeps a thread of its own (default: half the machine's cores, \
      1 to 8).
      """)
  var readerThreads: Int?

  @Option(help: "B1, B2, W1, B5: writer connections, each a client of its own (default 4; W1 8).")
  var writers: Int?

  @Option(
    help:
      "B1, B2, B5: seconds after the last batch for every subscriber to see the final state (default 10; B2 5)."
  )
  var drainSeconds: Double?

  @Option(help: "B5: background batches per second over the slow device's other pages (default 20; 0: none).")
  var coldRate = 20.0

  @Option(help: "B5: mutations per background batch (default 100).")
  var coldBatch = 100

  @Flag(help: "B5: a control run, the 'slow' device keeps reading (what one more such device costs).")
  var control = false

  @Option(
    help: "B6: idle device streams to open (default: as many as the descriptor limit allows; --quick 1000).")
  var connections: Int?

  @Option(help: "B6: seconds with every stream open before the memory is read (default 2).")
  var settleSeconds = 2.0

  @Option(help: "W1: mutations per batch (default 10).")
  var batchSize = 10

  @Option(
    help: """
      W1: pages written (default 100); C1: the device's offline pages (default 10000; --quick 2000); \
      B2: pages the subscribers spread over (default: one per subscriber); B5: the slow device's pages \
      besides the hot one, written in the background (default 1000).
      """)
  var pages: Int?

  @Flag(help: "W1: closed loop at saturation instead of a fixed rate.")
  var saturate = false

  @Option(help: "W1 --saturate: batches in flight per writer (default 4).")
  var depth = 4

  @Option(help: "C1: percent of the offline pages changed while the device is away (default 1).")
  var changedPercent = 1.0

  func fanOut(quick: Bool) throws -> FanOutOptions {
    var options = FanOutOptions()
    options.subscribers = subscribers ?? (quick ? 200 : 1000)
    options.seconds = seconds ?? (quick ? 3 : 10)
    options.rate = rate ?? 1000
    options.writers = writers ?? 4
    options.drainSeconds = drainSeconds ?? 10
    try applyReaderThreads(to: &options)
    if sweep {
      options.rising = true
      options.rate = rate ?? 100
      options.factor = factor
      options.maximumRate = maxRate ?? (quick ? 4000 : 128_000)
      options.seconds = seconds ?? (quick ? 2 : 5)
      options.drainSeconds = drainSeconds ?? 5
    }
    guard options.subscribers >= 1, options.rate > 0, options.seconds > 0, options.writers >= 1,
      options.drainSeconds > 0, !sweep || (options.factor > 1 && options.maximumRate >= options.rate)
    else {
      throw ValidationError(
        """
        --subscribers, --rate, --seconds, --writers and --drain-seconds must be positive; with --sweep, --factor         above 1 and --max-rate at least --rate
        """)
    }
    return options
  }

  /// B2: B1's generator over one page per subscriber, at rising rates.
  func spread(quick: Bool) throws -> FanOutOptions {
    var options = FanOutOptions()
    options.subscribers = subscribers ?? (quick ? 200 : 1000)
    options.pages = pages ?? options.subscribers
    options.seconds = seconds ?? (quick ? 2 : 5)
    options.rate = rate ?? 250
    options.writers = writers ?? 4
    options.drainSeconds = drainSeconds ?? 5
    try applyReaderThreads(to: &options)
    options.rising = true
    options.factor = factor
    options.maximumRate = maxRate ?? (quick ? 4000 : 1_024_000)
    guard options.subscribers >= 1, (1...options.subscribers).contains(options.pages), options.rate > 0,
      options.seconds > 0, options.writers >= 1, options.drainSeconds > 0, options.factor > 1,
      options.maximumRate >= options.rate
    else {
      throw ValidationError(
        "B2: sizes must be positive, --pages at most --subscribers, --factor above 1, --max-rate at least --rate"
      )
    }
    return options
  }

  /// `--reader-threads`, checked (1 to 64, at most one per subscriber).
  func applyReaderThreads(to options: inout FanOutOptions) throws {
    guard let readerThreads else { return }
    guard (1...64).contains(readerThreads) else { throw ValidationError("--reader-threads must be 1 to 64") }
    options.readerThreads = min(readerThreads, max(options.subscribers, 1))
  }

  func slowConsumer(quick: Bool) throws -> SlowConsumerOptions {
    var options = SlowConsumerOptions()
    options.healthy = subscribers ?? 100
    options.rate = rate ?? 500
    options.seconds = seconds ?? (quick ? 3 : 20)
    options.writers = writers ?? 4
    options.drainSeconds = drainSeconds ?? 10
    options.coldPages = pages ?? 1000
    options.coldRate = coldRate
    options.coldBatch = coldBatch
    options.control = control
    guard options.healthy >= 1, options.coldPages >= 0, options.coldRate >= 0,
      (1...1000).contains(options.coldBatch), options.rate > 0, options.seconds > 0, options.writers >= 1,
      options.drainSeconds > 0
    else {
      throw ValidationError("B5 sizes must be positive")
    }
    guard options.seconds <= 25 else {
      throw ValidationError(
        "B5: --seconds at most 25: the broker drops a device that answers no ping for 30 s (ping_interval)")
    }
    return options
  }

  func idleDensity(quick: Bool) throws -> IdleDensityOptions {
    var options = IdleDensityOptions()
    options.connections = connections ?? (quick ? 1000 : nil)
    options.settleSeconds = settleSeconds
    guard (options.connections ?? 1) >= 1, options.settleSeconds >= 0 else {
      throw ValidationError("B6: --connections must be positive")
    }
    return options
  }

  func writes(quick: Bool) throws -> WriteOptions {
    var options = WriteOptions()
    options.rate = rate ?? 1000
    options.seconds = seconds ?? (quick ? 3 : 10)
    options.writers = writers ?? 8
    options.batchSize = batchSize
    options.pages = pages ?? 100
    options.saturate = saturate
    options.depth = depth
    guard options.rate > 0, options.seconds > 0, options.writers >= 1, options.depth >= 1,
      (1...1000).contains(options.batchSize), options.pages >= 1
    else {
      throw ValidationError("W1 sizes must be positive, --batch-size at most 1000")
    }
    return options
  }

  func catchUp(quick: Bool) throws -> CatchUpOptions {
    var options = CatchUpOptions()
    options.pages = pages ?? (quick ? 2000 : 10_000)
    options.changedPercent = changedPercent
    guard options.pages >= 1, (0...100).contains(options.changedPercent) else {
      throw ValidationError("C1: --pages must be positive and --changed-percent within 0...100")
    }
    return options
  }
}

/// The scenarios, by the names docs/benchmarks.md gives them.
enum Scenario: String, ExpressibleByArgument, CaseIterable {
  case fanOut = "B1"
  case spread = "B2"
  case slowConsumer = "B5"
  case idleDensity = "B6"
  case durableWrites = "W1"
  case catchUp = "C1"
  case density = "B3"
  case reconnectStorm = "B4"
  case soak = "B7"
}

struct RunCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run", abstract: "Run one scenario against the broker and print its figures.")

  @Argument(
    help: """
      B1 (fan-out), B2 (spread), B3 (density), B4 (reconnect storm), B5 (slow consumer), B6 (idle density), \
      B7 (soak), W1 (durable writes) or C1 (catch-up).
      """
  )
  var scenario: Scenario

  @OptionGroup var common: CommonOptions
  @OptionGroup var sizes: Sizes
  @OptionGroup(title: "Density (B3, B4, B7)") var density: DensitySizes
  @OptionGroup(title: "Cluster") var cluster: ClusterOptions

  func run() throws {
    let runner = try LoadRunner(settings: cluster.settings(common))
    defer { Output.close(runner) }
    let report: ReportValue
    switch scenario {
    case .fanOut: report = try runner.fanOut(sizes.fanOut(quick: common.quick))
    case .spread: report = try runner.fanOut(sizes.spread(quick: common.quick), scenario: "B2")
    case .slowConsumer: report = try runner.slowConsumer(sizes.slowConsumer(quick: common.quick))
    case .idleDensity: report = try runner.idleDensity(sizes.idleDensity(quick: common.quick))
    case .durableWrites: report = try runner.writes(sizes.writes(quick: common.quick))
    case .catchUp: report = try runner.catchUp(sizes.catchUp(quick: common.quick))
    case .density: report = try runner.density(density.density(sizes, quick: common.quick))
    case .reconnectStorm: report = try runner.reconnectStorm(density.reconnect(sizes, quick: common.quick))
    case .soak: report = try runner.soak(density.soak(sizes, quick: common.quick, timeout: common.timeout))
    }
    let labelled = Output.labelled(report, common.label)
    Output.print(labelled, json: common.json)
    try Output.writeHTML(of: [labelled], to: common.html)
    if report["ok"].map({ if case .bool(false) = $0 { true } else { false } }) == true {
      throw ExitCode(2)
    }
  }
}

struct CompareCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "compare",
    abstract: "Run a scenario against the broker and against a local redis-server, with the same generator.")

  @Argument(help: "B1 (fan-out), B2 (spread) or B3 (density).")
  var scenario: Scenario

  @OptionGroup var common: CommonOptions
  @OptionGroup var sizes: Sizes
  @OptionGroup(title: "Density (B3)") var density: DensitySizes
  @OptionGroup(title: "Cluster (compare one broker alone with them)") var cluster: ClusterOptions

  func run() throws {
    if try !cluster.cluster().isPlain { return try compareCluster() }
    if scenario == .density { return try compareDensity() }
    guard scenario == .fanOut || scenario == .spread else {
      throw ValidationError("compare supports B1, B2 and B3")
    }
    let runner = try LoadRunner(settings: common.settings)
    defer { Output.close(runner) }
    let options =
      scenario == .fanOut ? try sizes.fanOut(quick: common.quick) : try sizes.spread(quick: common.quick)
    let pagesync = try runner.fanOut(options, scenario: scenario.rawValue)
    let redis = try runner.fanOutRedis(options, scenario: scenario.rawValue)
    try Output.comparison(scenario: scenario.rawValue, pagesync: pagesync, redis: redis, common: common)
  }
}

enum Output {
  /// Closes the runner's loop; a handle left open is a harness bug, reported but not fatal to the report.
  static func close(_ runner: LoadRunner) {
    do { try runner.close() } catch { LoadHarness.HostProcess.writeError("pagesync-load: \(error)\n") }
  }

  /// `report` with `"label"` (`--label`), or as it is without one.
  static func labelled(_ report: ReportValue, _ label: String?) -> ReportValue {
    label.map { report.labelled($0) } ?? report
  }

  /// `compare`'s output: the JSON or the table, and the plots with `--html`.
  static func comparison(scenario: String, pagesync: ReportValue, redis: ReportValue, common: CommonOptions)
    throws
  {
    let report = labelled(
      ComparisonReport.make(scenario: scenario, pagesync: pagesync, redis: redis), common.label)
    write(common.json ? report.json + "\n" : ComparisonReport.table(pagesync: pagesync, redis: redis))
    try writeHTML(of: [report], to: common.html)
  }

  /// The plots of `reports` as one HTML page at `path` (nothing without a path).
  static func writeHTML(of reports: [ReportValue], to path: String?) throws {
    guard let path else { return }
    try ReportFile.write(PlotReport.html(try PlotData(reports: reports)), to: path)
  }

  static func print(_ report: ReportValue, json: Bool) {
    write(json ? report.json + "\n" : ReportTable.render(report))
  }

  static func write(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = Glibc.write(1, bytes.baseAddress, bytes.count) }
  }
}
