import ArgumentParser
import LoadCore
import LoadHarness

/// `pagesync-load text`: the rich-text benchmark (RichText) on editing traces, no broker involved.
struct TextCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "text",
    abstract: "Replay editing traces through RichText: local apply, merge, memory, encoded size.",
    discussion: """
      Traces in the josephg/editing-traces format, gzip'd (.gz, read through gzip -dc) or plain JSON: \
      ../shared/data/editing-traces/ (README.md there). Every timed run checks the text it ends on.
      """)

  @Option(help: "An editing trace (repeat the option for several).")
  var trace: [String]

  @Option(name: .customLong("repeat"), help: "Runs of each timed figure; the report gives the median.")
  var repeats = 5

  @Option(help: "Replay only the first N patches of a sequential trace (for profiling).")
  var edits: Int?

  @Flag(help: "Print one JSON object per trace instead of a table.")
  var json = false

  @Flag(help: "No progress line on stderr.")
  var quiet = false

  func validate() throws {
    guard !trace.isEmpty else { throw ValidationError("give at least one --trace") }
    guard repeats >= 1 else { throw ValidationError("--repeat must be at least 1") }
    guard (edits ?? 1) >= 1 else { throw ValidationError("--edits must be positive") }
  }

  func run() throws {
    var options = TextTraceOptions()
    options.repeats = repeats
    options.edits = edits
    var failed = false
    for path in trace {
      let loaded = try EditingTrace.load(path: path)
      let name = String(path.split(separator: "/").last ?? Substring(path))
      let report = TextTraceRun.run(loaded, name: name, options: options, progress: !quiet)
      Output.print(report, json: json)
      if case .bool(false) = report["ok"] { failed = true }
    }
    if failed { throw ExitCode(2) }
  }
}
