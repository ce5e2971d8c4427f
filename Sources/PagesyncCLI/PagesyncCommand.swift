import ArgumentParser

#if canImport(Glibc)
  import Glibc
#endif

/// `pagesync`: the command line of the daemon's local API (docs/protocol.md, "The daemon's local API";
/// docs/cli.md).
///
/// Each leaf command validates its arguments (ids, `NAME=VALUE`), sends one HTTP request over the daemon's
/// Unix socket, and prints the answer as text or, with `--json`, as the daemon's JSON.
public struct PagesyncCommand: ParsableCommand {
  public static let configuration = CommandConfiguration(
    commandName: "pagesync",
    abstract: "Drive the pagesync daemon on this device.",
    discussion: """
      Every command talks to pagesyncd over its Unix socket: --socket PATH, else \
      $PAGESYNC_SOCKET, else \(ConnectionOptions.defaultSocketPath). --socket and --json go after \
      the command's words (or before them). With --json, stdout is the daemon's answer, one JSON value (nothing on \
      failure). A VALUE that parses as JSON (a number, true/false, a list of strings) is sent as \
      that; anything else, the empty text included, is a string. Ids are 1 to 64 of A-Z a-z 0-9 _ -.

      EXIT STATUS
        0   success
        1   the daemon answered an error (its message is printed), its answer
            is not valid JSON, or the connection closed before the answer
        64  bad usage: unknown command or option, missing option, bad id,
            --set without =, an edit with nothing to change
        69  the daemon cannot be reached on its socket (not running, or a
            wrong --socket or PAGESYNC_SOCKET)
        75  no answer in time (30 s; 120 s for sync): the outcome is unknown
      """,
    subcommands: [
      Status.self, Create.self, Edit.self, Block.self, Delete.self, View.self, Offline.self, Favorite.self,
      Visit.self, Why.self, Show.self, Sync.self, Conflicts.self, Watch.self,
    ])

  public init() {}
}

extension PagesyncCommand {
  /// Runs the command line. `--socket PATH` and `--json` given before the command's words
  /// (`pagesync --json status`) are moved after them, where every leaf command reads them: both orders work.
  public static func run(arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
    // A daemon that hangs up while we write, or a reader of our output that went away, must give EPIPE (which
    // each command handles), not kill the process.
    signal(SIGPIPE, SIG_IGN)
    main(withoutGlobalOptionsUnlessACommandIsNamed(movingLeadingGlobalOptions(arguments)))
  }

  /// `--socket` and `--json` belong to the leaf commands. When a word where a command should be names none
  /// (`pagesync frobnicate --json`, `pagesync offline toggle home --socket S`), they are dropped, so the usage
  /// error names that word instead of calling `--json` an unknown option.
  static func withoutGlobalOptionsUnlessACommandIsNamed(_ arguments: [String]) -> [String] {
    var command: any ParsableCommand.Type = PagesyncCommand.self
    var index = 0
    while index < arguments.count, !command.configuration.subcommands.isEmpty,
      let next = command.configuration.subcommands.first(where: { $0._commandName == arguments[index] })
    {
      command = next
      index += 1
    }
    guard !command.configuration.subcommands.isEmpty, index < arguments.count,
      !arguments[index].hasPrefix("-"), arguments[index] != "help"
    else { return arguments }
    var kept: [String] = []
    var rest = arguments[...]
    while let first = rest.first {
      rest = rest.dropFirst()
      if first == "--json" || first.hasPrefix("--socket=") { continue }
      if first == "--socket" {
        rest = rest.dropFirst()
        continue
      }
      kept.append(first)
    }
    return kept
  }

  /// `arguments` with the leading `--socket PATH`, `--socket=PATH` and `--json` moved to the end.
  static func movingLeadingGlobalOptions(_ arguments: [String]) -> [String] {
    var rest = arguments[...]
    var global: [String] = []
    while let first = rest.first {
      if first == "--json" || first.hasPrefix("--socket=") {
        global.append(first)
        rest = rest.dropFirst()
      } else if first == "--socket", rest.count >= 2 {
        global += rest.prefix(2)
        rest = rest.dropFirst(2)
      } else {
        break
      }
    }
    // Without a command the options stay where they were, so the usage error names them.
    return rest.isEmpty ? arguments : Array(rest) + global
  }
}
