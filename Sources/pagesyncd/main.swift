import ArgumentParser
import Daemon

/// `pagesyncd --config FILE [--check-config]`: parse, validate, open the store, serve and sync
/// (docs/operations.md).
struct DaemonCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pagesyncd",
    abstract: "The pagesync device daemon: offline pages, push-driven sync, queued edits, the local API.")

  @Option(name: .long, help: "The TOML configuration file (embedded defaults when absent).")
  var config: String?

  @Flag(name: .long, help: "Validate the configuration and exit.")
  var checkConfig = false

  func run() throws {
    let configuration: DaemonConfiguration
    do {
      configuration = try DaemonMain.loadConfiguration(path: config)
    } catch {
      throw ValidationError("\(error)")
    }
    if checkConfig {
      print(
        "configuration ok: broker \(configuration.brokerURLs.map(\.description).joined(separator: ", ")), store \(configuration.storePath), "
          + "socket \(configuration.socketPath)")
      return
    }
    try DaemonMain.run(configuration, configPath: config)
  }
}

DaemonCommand.main()
