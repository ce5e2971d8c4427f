import ArgumentParser

/// `pagesync`: the command line of the daemon's local API (docs/protocol.md, "The daemon's local API").
public struct PagesyncCommand: ParsableCommand {
  public static let configuration = CommandConfiguration(
    commandName: "pagesync", abstract: "Drive the pagesync daemon on this device.")

  public init() {}
}
