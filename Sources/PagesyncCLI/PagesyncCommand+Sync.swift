import ArgumentParser
import PagesyncClient

// The daemon's state and its sync: status, sync, conflicts (`/v1/status`, `/v1/sync`, `/v1/conflicts`).

extension PagesyncCommand {
  /// `status`: `GET /v1/status`.
  struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Show the connection, pending and failed mutations, the last sync and the offline page count."
    )

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.status, human: HumanOutput.status)
    }
  }

  /// `sync`: `POST /v1/sync`.
  struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Push queued mutations, then catch up; returns when done.",
      discussion: """
        Fails (the daemon answers 503) if the broker is unreachable. Waits up to \
        \(LocalAPIRequest.syncTimeoutSeconds) s.
        """)

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.sync, human: HumanOutput.sync)
    }
  }

  /// `conflicts`: `GET /v1/conflicts`.
  struct Conflicts: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "List the mutations the broker rejected, kept for recovery.")

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.conflicts, human: HumanOutput.conflicts)
    }
  }
}
