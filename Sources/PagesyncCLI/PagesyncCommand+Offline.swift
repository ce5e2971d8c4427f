import ArgumentParser
import PagesyncClient
import SyncModel

// The offline set and its reasons: offline, favorite, visit, why (`/v1/offline`, `/v1/favorites`,
// `/v1/visits`, `/v1/why`).

extension PagesyncCommand {
  /// `offline add|remove|list`.
  struct Offline: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Toggle pages offline, or list the offline set.",
      subcommands: [OfflineAdd.self, OfflineRemove.self, OfflineList.self])
  }

  /// `offline add ID`: `PUT /v1/offline/ID`.
  struct OfflineAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "add",
      abstract: "Keep a page offline, with its inline databases and their first rows in view.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.addOffline(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.offlineSet("\(id) is toggled offline", answer)
      }
    }
  }

  /// `offline remove ID`: `DELETE /v1/offline/ID`.
  struct OfflineRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "remove",
      abstract: "Stop keeping a page offline by toggle (other reasons, such as favorite, still hold).")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.removeOffline(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.offlineSet("\(id) is no longer toggled offline", answer)
      }
    }
  }

  /// `offline list`: `GET /v1/offline`.
  struct OfflineList: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "list",
      abstract: "List the offline set: each page, why it is kept, how fresh, complete or not.")

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.offlinePages, human: HumanOutput.offlineList)
    }
  }

  /// `favorite add|remove`.
  struct Favorite: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Mark pages favorite (favorites are kept offline).",
      subcommands: [FavoriteAdd.self, FavoriteRemove.self])
  }

  /// `favorite add ID`: `PUT /v1/favorites/ID`.
  struct FavoriteAdd: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Mark a page favorite.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.addFavorite(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.offlineSet("\(id) is a favorite", answer)
      }
    }
  }

  /// `favorite remove ID`: `DELETE /v1/favorites/ID`.
  struct FavoriteRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "remove", abstract: "Unmark a favorite page.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.removeFavorite(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.offlineSet("\(id) is no longer a favorite", answer)
      }
    }
  }

  /// `visit ID`: `POST /v1/visits/ID`.
  struct Visit: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Record a visit: the most recently visited pages are kept offline.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.visit(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.offlineSet("visit of \(id) recorded", answer)
      }
    }
  }

  /// `why ID`: `GET /v1/why/ID`.
  struct Why: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Show why a page is offline: the offline_action rows that keep it.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.why(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.why(id.rawValue, answer)
      }
    }
  }
}
