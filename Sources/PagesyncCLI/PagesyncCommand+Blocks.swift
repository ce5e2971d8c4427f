import ArgumentParser
import SyncModel

// Blocks: add, edit, delete (`/v1/pages/ID/blocks`, `/v1/blocks/ID`) and a database's view
// (`/v1/pages/ID/view`).

extension PagesyncCommand {
  /// `block add|edit|delete`.
  struct Block: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Add, edit or delete a block of a page.",
      subcommands: [BlockAdd.self, BlockEdit.self, BlockDelete.self])
  }

  /// `block add PAGE --id BLOCK --text T [--after BLOCK] [--type TYPE]`: `POST /v1/pages/PAGE/blocks`.
  struct BlockAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "add", abstract: "Add a block to a page (first without --after).")

    @Argument(help: "The page.", transform: parseEntityID) var page: EntityID
    @Option(help: "The new block's id.", transform: parseEntityID) var id: EntityID
    @Option(help: "The block's text.") var text: String
    @Option(help: "The block it goes after (default: it goes first).", transform: parseEntityID)
    var after: EntityID?
    @Option(
      help: "text (the default), heading, todo, child_page, child_database, or any [a-z_]{1,32}.",
      transform: parseBlockType)
    var type: String?
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      var body: [String: JSONValue] = ["id": .string(id.rawValue), "text": .string(text)]
      if let type { body["type"] = .string(type) }
      if let after { body["after"] = .string(after.rawValue) }
      try connection.perform(LocalAPIRequest(.POST, "/v1/pages/\(page)/blocks", body: .object(body))) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("added block \(id) to page \(page)", answer)
      }
    }
  }

  /// `block edit BLOCK --text T`: `PATCH /v1/blocks/BLOCK`.
  struct BlockEdit: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "edit", abstract: "Change a block's text.")

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @Option(help: "The new text.") var text: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      let body = JSONValue.object(["text": .string(text)])
      try connection.perform(LocalAPIRequest(.PATCH, "/v1/blocks/\(block)", body: body)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("edited block \(block)\(onPage(answer))", answer)
      }
    }
  }

  /// `block delete BLOCK`: `DELETE /v1/blocks/BLOCK`.
  struct BlockDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a block.")

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(LocalAPIRequest(.DELETE, "/v1/blocks/\(block)")) { answer throws(CLIFailure) in
        try HumanOutput.queued("deleted block \(block)\(onPage(answer))", answer)
      }
    }
  }

  /// `view set DB`.
  struct View: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Set a database's current view.", subcommands: [ViewSet.self])
  }

  /// `view set DB [--filter NAME=VALUE] [--sort NAME[:desc]]`: `PUT /v1/pages/DB/view`.
  struct ViewSet: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "set",
      abstract: "Set a database's current view: which rows, in which order.",
      discussion: """
        The view is replaced as a whole: an option left out is cleared (no filter; creation order), so \
        `view set DB` alone resets the view.
        """)

    @Argument(help: "The database.", transform: parseEntityID) var database: EntityID
    @Option(
      help: ArgumentHelp("Only rows whose property NAME equals VALUE.", valueName: "name=value"),
      transform: PropertyAssignment.parse)
    var filter: PropertyAssignment?
    @Option(
      help: ArgumentHelp("Order rows by a property, ascending unless :desc.", valueName: "name[:desc]"),
      transform: SortOrder.parse)
    var sort: SortOrder?
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      // Both members are always sent: null clears (the contract's `{"filter": …|null, "sort": …|null}`).
      let filterValue: JSONValue =
        filter.map { .object(["property": .string($0.name), "value": JSONValue($0.value)]) } ?? .null
      let sortValue: JSONValue =
        sort.map { .object(["property": .string($0.property), "descending": .bool($0.descending)]) } ?? .null
      let body = JSONValue.object(["filter": filterValue, "sort": sortValue])
      try connection.perform(LocalAPIRequest(.PUT, "/v1/pages/\(database)/view", body: body)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("set the view of database \(database)", answer)
      }
    }
  }
}

/// ` of page PAGE` from a block answer's `page`, or nothing.
private func onPage(_ answer: JSONValue) -> String {
  answer["page"]?.stringValue.map { " of page \($0)" } ?? ""
}
