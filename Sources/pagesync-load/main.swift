import ArgumentParser
import LoadCore
import LoadHarness

/// `pagesync-load`: the load harness (docs/benchmarks.md). `main` only parses and hands over to LoadHarness,
/// which builds the loop (its C callbacks must not be created in `@MainActor` code).
struct LoadCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pagesync-load",
    abstract:
      "Load scenarios against pagesync-broker, and side by side with redis-server; RichText on editing traces.",
    subcommands: [RunCommand.self, CompareCommand.self, RenderCommand.self, TextCommand.self])
}

LoadCommand.main()
