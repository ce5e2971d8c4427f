import ArgumentParser
import PagesyncClient
import SyncModel

// Pages, databases and rows: create, edit, delete, show (`/v1/pages`).

extension PagesyncCommand {
  /// `create page|database|row`: `POST /v1/pages`.
  struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Create a page, a database or a database row.",
      subcommands: [CreatePage.self, CreateDatabase.self, CreateRow.self])
  }

  /// `create page --id ID [--parent ID] [--title T]`.
  struct CreatePage: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "page", abstract: "Create a page (top level without --parent).")

    @Option(help: "The new page's id.", transform: parseEntityID) var id: EntityID
    @Option(help: "The parent page.", transform: parseEntityID) var parent: EntityID?
    @Option(help: "The title.") var title: String?
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.createPage(id: id.rawValue, parent: parent?.rawValue, title: title)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("created page \(id)", answer)
      }
    }
  }

  /// `create database --id ID [--parent PAGE] [--title T]`.
  struct CreateDatabase: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "database",
      abstract: "Create a database (with --parent, inline in that page; top level without).")

    @Option(help: "The new database's id.", transform: parseEntityID) var id: EntityID
    @Option(help: "The page the database is inline in.", transform: parseEntityID) var parent: EntityID?
    @Option(help: "The title.") var title: String?
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.createDatabase(id: id.rawValue, parent: parent?.rawValue, title: title)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("created database \(id)", answer)
      }
    }
  }

  /// `create row --database DB --id ID [--title T] [--set NAME=VALUE ...]`.
  struct CreateRow: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "row", abstract: "Create a row of a database.")

    @Option(help: "The database.", transform: parseEntityID) var database: EntityID
    @Option(help: "The new row's id.", transform: parseEntityID) var id: EntityID
    @Option(help: "The title.") var title: String?
    @Option(
      name: .customLong("set"),
      help: ArgumentHelp("A property of the row (repeatable).", valueName: "name=value"),
      transform: PropertyAssignment.parse)
    var assignments: [PropertyAssignment] = []
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
      _ = try usage { () throws(CommandLineValueError) in try propertiesObject(assignments) }
    }

    func run() throws {
      let properties = try usage { () throws(CommandLineValueError) in try propertiesObject(assignments) }
      let call = LocalAPICall.createRow(
        database: database.rawValue, id: id.rawValue, title: title, properties: properties)
      try connection.perform(call) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("created row \(id) in database \(database)", answer)
      }
    }
  }

  /// `edit ID [--title T] [--set NAME=VALUE ...] [--unset NAME ...]`: `PATCH /v1/pages/ID`.
  struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Change a page's title or properties.",
      discussion: "--set NAME= sets the empty string; --unset NAME removes the property (sent as null).")

    @Argument(help: "The page, database or row.", transform: parseEntityID) var id: EntityID
    @Option(help: "The new title.") var title: String?
    @Option(
      name: .customLong("set"),
      help: ArgumentHelp("Set a property (repeatable).", valueName: "name=value"),
      transform: PropertyAssignment.parse)
    var assignments: [PropertyAssignment] = []
    @Option(
      name: .customLong("unset"), help: ArgumentHelp("Remove a property (repeatable).", valueName: "name"),
      transform: parsePropertyName)
    var removals: [String] = []
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
      guard title != nil || !assignments.isEmpty || !removals.isEmpty else {
        throw ValidationError("nothing to change: give --title, --set NAME=VALUE or --unset NAME")
      }
      _ = try usage { () throws(CommandLineValueError) in try propertiesObject(assignments, unset: removals) }
    }

    func run() throws {
      let properties = try usage { () throws(CommandLineValueError) in
        try propertiesObject(assignments, unset: removals)
      }
      try connection.perform(.editPage(id.rawValue, title: title, properties: properties)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("edited page \(id)", answer)
      }
    }
  }

  /// `delete ID`: `DELETE /v1/pages/ID`.
  struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a page, a database or a row.")

    @Argument(help: "The page, database or row.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.deletePage(id.rawValue)) { answer throws(CLIFailure) in
        try HumanOutput.queued("deleted page \(id)", answer)
      }
    }
  }

  /// `show ID`: `GET /v1/pages/ID`.
  struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Show a page as stored locally (read through from the broker while connected).",
      discussion: "Offline, a page that is not complete offline is refused: never half a page.")

    @Argument(help: "The page or database.", transform: parseEntityID) var id: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.page(id.rawValue), human: HumanOutput.page)
    }
  }
}

/// Runs `body`, turning a refused value into a usage error (exit 64, with the usage).
func usage<T>(_ body: () throws(CommandLineValueError) -> T) throws(ValidationError) -> T {
  do {
    return try body()
  } catch {
    throw ValidationError(error.description)
  }
}
