import ArgumentParser

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
      the command's words. With --json, stdout is the daemon's answer, one JSON value (nothing on \
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
      Visit.self, Why.self, Show.self, Sync.self, Conflicts.self,
    ])

  public init() {}
}
