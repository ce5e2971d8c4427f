import ArgumentParser
import LoadCore
import LoadHarness

/// The density scenarios' sizes (B3, B4, B7), apart from `Sizes` so that each scenario's options stay together;
/// they also read `--seconds`, `--writers`, `--drain-seconds` and `--changed-percent` from `Sizes`.
struct DensitySizes: ParsableArguments {
  @Option(help: "B3, B4, B7: device streams (default 1000; --quick 100).")
  var devices: Int?

  @Option(help: "B3, B4, B7: pages each device subscribes to (default B3, B4 1000, B7 100; --quick 100).")
  var pagesPerDevice: Int?

  @Option(
    help: """
      B3, B4, B7: pages the devices draw from (default B3, B4: --pages-per-device, every device the same pages; \
      B7 10000).
      """)
  var pool: Int?

  @Option(help: "B3: notifications per second to devices while writing (default 50000).")
  var updates = 50_000.0

  @Option(help: "B4: devices returning at once (default 0: all together).")
  var stormConcurrency = 0

  @Option(help: "B7: batches per second for the whole soak (default 100).")
  var writeRate = 100.0

  @Option(help: "B7: percent of the devices that disconnect and come back per minute (default 10).")
  var churnPercent = 10.0

  @Option(help: "B7: seconds between two readings of the broker's RSS and descriptors (default 1).")
  var sampleSeconds = 1.0

  func density(_ sizes: Sizes, quick: Bool) throws -> DensityOptions {
    var options = DensityOptions()
    options.devices = devices ?? (quick ? 100 : 1000)
    options.pagesPerDevice = pagesPerDevice ?? (quick ? 100 : 1000)
    options.pool = pool
    options.updatesPerSecond = updates
    options.seconds = sizes.seconds ?? (quick ? 3 : 10)
    options.writers = sizes.writers ?? 4
    options.drainSeconds = sizes.drainSeconds ?? 10
    guard options.devices >= 1, options.pagesPerDevice >= 1,
      (pool ?? options.pagesPerDevice) >= options.pagesPerDevice,
      options.updatesPerSecond > 0, options.seconds > 0, options.writers >= 1
    else {
      throw ValidationError("B3: sizes must be positive and --pool at least --pages-per-device")
    }
    return options
  }

  func reconnect(_ sizes: Sizes, quick: Bool) throws -> ReconnectOptions {
    var options = ReconnectOptions()
    options.density = try density(sizes, quick: quick)
    options.changedPercent = sizes.changedPercent
    options.stormConcurrency = stormConcurrency
    guard (0...100).contains(options.changedPercent), stormConcurrency >= 0 else {
      throw ValidationError("B4: --changed-percent within 0...100, --storm-concurrency not negative")
    }
    return options
  }

  /// `timeout`: `--timeout`, which bounds the whole run: a soak that cannot end within it is refused at once.
  func soak(_ sizes: Sizes, quick: Bool, timeout: Int) throws -> SoakOptions {
    var options = SoakOptions()
    options.density.devices = devices ?? (quick ? 100 : 1000)
    options.density.pagesPerDevice = pagesPerDevice ?? 100
    options.density.pool = pool ?? max(10_000, options.density.pagesPerDevice)
    options.density.seconds = sizes.seconds ?? (quick ? 10 : 60)
    options.density.writers = sizes.writers ?? 4
    options.writeRate = writeRate
    options.churnPercentPerMinute = churnPercent
    options.sampleSeconds = sampleSeconds
    guard options.density.devices >= 1, options.density.pagesPerDevice >= 1,
      options.density.pool! >= options.density.pagesPerDevice, options.writeRate > 0,
      options.density.seconds > 0,
      churnPercent >= 0, sampleSeconds > 0
    else {
      throw ValidationError("B7: sizes and rates must be positive, --pool at least --pages-per-device")
    }
    // Setting up (pages, streams) and settling take time too: a minute and a half at the default sizes here.
    guard Double(timeout) >= options.density.seconds + 180 else {
      throw ValidationError(
        "B7: --timeout \(timeout) leaves too little time for --seconds \(Int(options.density.seconds)) "
          + "(give --timeout at least --seconds + 180)")
    }
    return options
  }
}

extension CompareCommand {
  /// `compare B3`: the density run against the broker, then against redis-server, with the same generator.
  func compareDensity() throws {
    let runner = try LoadRunner(settings: common.settings)
    defer { Output.close(runner) }
    let options = try density.density(sizes, quick: common.quick)
    let pagesync = try runner.density(options)
    let redis = try runner.densityRedis(options)
    try Output.comparison(scenario: "B3", pagesync: pagesync, redis: redis, common: common)
  }
}
