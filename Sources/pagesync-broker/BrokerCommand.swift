import ArgumentParser
import Broker

/// `pagesync-broker --config FILE [--check-config]`: parse, validate, build, run (docs/operations.md).
@main
struct BrokerCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pagesync-broker",
    abstract: "The pagesync server: the page store, exactly-once batches, per-page channels, catch-up.")

  @Option(name: .long, help: "The TOML configuration file (embedded defaults when absent).")
  var config: String?

  @Flag(name: .long, help: "Validate the configuration and exit.")
  var checkConfig = false

  func run() throws {
    let configuration: BrokerConfiguration
    do {
      configuration = try BrokerMain.loadConfiguration(path: config)
    } catch {
      throw ValidationError("\(error)")
    }
    if checkConfig {
      let tls = configuration.tlsCertificateFile.map { ", TLS certificate \($0)" } ?? ""
      print("configuration ok: listen \(configuration.listen)\(tls), store \(configuration.storePath)")
      return
    }
    try BrokerMain.run(configuration, configPath: config)
  }
}
