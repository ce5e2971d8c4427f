import ArgumentParser
import PagesyncClient
import SyncModel

// Blocks: add, edit, delete (`/v1/pages/ID/blocks`, `/v1/blocks/ID`) and a database's view
// (`/v1/pages/ID/view`).

extension PagesyncCommand {
  /// `block add|edit|delete`.
  struct Block: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Add, edit, splice, mark or delete a block of a page.",
      subcommands: [BlockAdd.self, BlockEdit.self, BlockSplice.self, BlockMark.self, BlockDelete.self])
  }

  /// `block add PAGE --id BLOCK --text T [--after BLOCK | --first] [--type TYPE]`: `POST /v1/pages/PAGE/blocks`.
  struct BlockAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "add", abstract: "Add a block to a page (at the end without --after).")

    @Argument(help: "The page.", transform: parseEntityID) var page: EntityID
    @Option(help: "The new block's id.", transform: parseEntityID) var id: EntityID
    @Option(help: "The block's text.") var text: String
    @Option(help: "The block it goes after (default: it goes last).", transform: parseEntityID)
    var after: EntityID?
    @Flag(help: "Put the block first.") var first = false
    @Option(
      help: "text (the default), heading, todo, child_page, child_database, or any [a-z_]{1,32}.",
      transform: parseBlockType)
    var type: String?
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
      if after != nil && first { throw ValidationError("give --after or --first, not both") }
    }

    func run() throws {
      // The daemon reads `after` before `first`: with both, the block goes after.
      let position: BlockPosition = after.map { .after($0.rawValue) } ?? (first ? .first : .last)
      let call = LocalAPICall.addBlock(
        to: page.rawValue, id: id.rawValue, text: text, type: type, position: position)
      try connection.perform(call) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("added block \(id) to page \(page)", answer)
      }
    }
  }

  /// `block edit BLOCK --text T`: `PATCH /v1/blocks/BLOCK` (merged as the fewest splices).
  struct BlockEdit: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "edit",
      abstract: "Change a block's whole text (merged as the fewest splices, so concurrent edits survive).")

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @Option(help: "The new text.") var text: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.editBlock(block.rawValue, text: text)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("edited block \(block)\(onPage(answer))", answer)
      }
    }
  }

  /// `block splice BLOCK --at N [--delete K] [--insert S]`: `POST /v1/blocks/BLOCK/splice`.
  struct BlockSplice: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "splice",
      abstract: "Delete and/or insert text at a position (positions count Unicode scalars from 0).")

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @Option(help: "Where, in Unicode scalars from 0.") var at: Int
    @Option(help: "How many scalars to delete there (default 0).") var delete: Int = 0
    @Option(help: "The text to insert there.") var insert: String = ""
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
      guard at >= 0 else { throw ValidationError("--at must be 0 or more") }
      guard delete >= 0 else { throw ValidationError("--delete must be 0 or more") }
      guard delete > 0 || !insert.isEmpty else { throw ValidationError("give --delete, --insert or both") }
    }

    func run() throws {
      try connection.perform(.spliceBlock(block.rawValue, at: at, delete: delete, insert: insert)) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("spliced block \(block)\(onPage(answer))", answer)
      }
    }
  }

  /// `block mark BLOCK --from N --to M --type TYPE [--value V] [--remove]`: `POST /v1/blocks/BLOCK/marks`.
  struct BlockMark: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "mark",
      abstract: "Set or remove a mark (bold, italic, underline, strike, code, link, color) over a range.",
      discussion: """
        The range is --from (included) to --to (excluded), in Unicode scalars from 0. link needs --value (the \
        URL), color needs --value (the color); the others take none. Text typed at the end of a bold, italic, \
        underline, strike or color range takes the mark; at the end of a link or code it does not.
        """)

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @Option(help: "The first scalar of the range.") var from: Int
    @Option(help: "The scalar after the range.") var to: Int
    @Option(help: "bold, italic, underline, strike, code, link or color.") var type: String
    @Option(help: "A link's URL or a color.") var value: String?
    @Flag(help: "Remove the mark from the range instead.") var remove = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
      let known = ["bold", "italic", "underline", "strike", "code", "link", "color"]
      guard known.contains(type) else {
        throw ValidationError("unknown mark type \"\(type)\": one of \(known.joined(separator: ", "))")
      }
      guard from >= 0, to > from else { throw ValidationError("--to must be greater than --from (>= 0)") }
    }

    func run() throws {
      let call = LocalAPICall.markBlock(
        block.rawValue, from: from, to: to, type: type, value: value, remove: remove)
      try connection.perform(call) {
        answer throws(CLIFailure) in
        try HumanOutput.queued("\(remove ? "unmarked" : "marked") block \(block)\(onPage(answer))", answer)
      }
    }
  }

  /// `block delete BLOCK`: `DELETE /v1/blocks/BLOCK`.
  struct BlockDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a block.")

    @Argument(help: "The block.", transform: parseEntityID) var block: EntityID
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      try connection.perform(.deleteBlock(block.rawValue)) { answer throws(CLIFailure) in
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
      let call = LocalAPICall.setView(
        of: database.rawValue,
        filter: filter.map { ViewFilter(property: $0.name, value: JSONValue($0.value)) },
        sort: sort.map { ViewSort(property: $0.property, descending: $0.descending) })
      try connection.perform(call) {
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
