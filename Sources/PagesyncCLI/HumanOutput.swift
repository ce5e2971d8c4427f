import PagesyncClient
import SyncModel

/// The human-readable form of each answer of the local API (what `pagesync` prints without `--json`).
///
/// Pure functions from the daemon's JSON to text without a final newline. A field that is missing is skipped
/// or shown as `-`, so a daemon that adds or drops an optional field still prints; an answer of the wrong
/// shape altogether (an object where a list is due) is `CLIFailure.invalidAnswer`.
public enum HumanOutput {
  // MARK: Edits

  /// One confirmation line for an edit: `created page home (queued mutation 7)`.
  public static func queued(_ what: String, _ answer: JSONValue) throws(CLIFailure) -> String {
    guard let ids = answer["mutationIds"]?.arrayValue else {
      throw .invalidAnswer("expected an object with \"mutationIds\", got \(answer.jsonText.prefix(200))")
    }
    let numbers = ids.map(display)
    switch numbers.count {
    case 0: return "\(what) (nothing queued)"
    case 1: return "\(what) (queued mutation \(numbers[0]))"
    default: return "\(what) (queued mutations \(numbers.joined(separator: ", ")))"
    }
  }

  /// The line for a change of the offline set: `home is toggled offline; 12 pages offline`.
  public static func offlineSet(_ what: String, _ answer: JSONValue) throws(CLIFailure) -> String {
    guard let count = answer["offlinePages"]?.integerValue else {
      throw .invalidAnswer("expected an object with \"offlinePages\", got \(answer.jsonText.prefix(200))")
    }
    return "\(what); \(count) \(count == 1 ? "page" : "pages") offline"
  }

  // MARK: Reads

  /// `status`: aligned `key: value` lines.
  public static func status(_ answer: JSONValue) throws(CLIFailure) -> String {
    guard answer.objectValue != nil else { throw wrongShape("an object", answer) }
    var lines = KeyValueLines()
    if let connected = answer["connected"]?.boolValue { lines.append("connected", connected ? "yes" : "no") }
    let fields: [(key: String, label: String)] = [
      ("state", "state"), ("pendingMutations", "pending mutations"), ("failedMutations", "failed mutations"),
      ("offlinePages", "offline pages"), ("missingPages", "missing pages"), ("fetchedPages", "fetched pages"),
      // Since the daemon started; shown when the daemon reports them.
      ("fetchRequests", "fetch requests"), ("catchUpRequests", "catch-ups"),
      ("batchesPushed", "batches pushed"), ("mutationsPushed", "mutations pushed"),
      ("mutationsRejected", "mutations rejected"), ("pushFailures", "push failures"),
      ("notificationsReceived", "notifications"), ("reconnects", "reconnects"),
      ("bytesReceived", "bytes received"), ("bytesSent", "bytes sent"),
    ]
    for field in fields {
      if let value = answer[field.key] { lines.append(field.label, display(value)) }
    }
    for (key, label) in [
      ("lastSuccessfulSync", "last successful sync"), ("lastSyncAttempt", "last sync attempt"),
    ] {
      if let value = answer[key] { lines.append(label, time(value)) }
    }
    for (key, label) in [("clientId", "client"), ("workspace", "workspace"), ("broker", "broker")] {
      if let value = answer[key] { lines.append(label, display(value)) }
    }
    // Where the token comes from, and what is wrong, when something is: a daemon without a usable token says so
    // here (docs/operations.md, "Tokens on the device").
    if let value = answer["tokenSource"] { lines.append("token", display(value)) }
    for (key, label) in [("tokenProblem", "token problem"), ("lastError", "last error")] {
      if let value = answer[key]?.stringValue { lines.append(label, value) }
    }
    return lines.text
  }

  /// `offline list`: ID, REASONS (`type:origin`, comma-separated), DOWNLOADED (the broker sequence the local
  /// copy is at), COMPLETE (`missing` for a page the broker says this device may not see, explained below the
  /// table).
  public static func offlineList(_ answer: JSONValue) throws(CLIFailure) -> String {
    guard let pages = answer.arrayValue else { throw wrongShape("a list", answer) }
    if pages.isEmpty { return "no page is offline" }
    var table = TextTable(["ID", "REASONS", "DOWNLOADED", "COMPLETE"])
    var missing = 0
    for page in pages {
      let reasons = (page["reasons"]?.arrayValue ?? []).map { reason in
        "\(display(reason["type"])):\(display(reason["origin"]))"
      }
      let isMissing = page["missing"]?.boolValue == true
      if isMissing { missing += 1 }
      table.append([
        display(page["id"]), reasons.isEmpty ? "-" : reasons.joined(separator: ", "),
        display(page["lastDownloadedTimestamp"]), isMissing ? "missing" : yesNo(page["complete"]),
      ])
    }
    guard missing > 0 else { return table.text }
    return table.text
      + "\n\nmissing: the broker says this device may not see \(missing == 1 ? "this page" : "these pages") (no such"
      + " page, or another workspace's). Kept as you asked until you remove the reason (offline remove, favorite"
      + " remove); downloaded if the broker has it later."
  }

  /// `why ID`: ORIGIN, FROM (`-` for the origin's own row), TYPE.
  public static func why(_ id: String, _ answer: JSONValue) throws(CLIFailure) -> String {
    guard let actions = answer.arrayValue else { throw wrongShape("a list", answer) }
    if actions.isEmpty { return "\(id) is not offline" }
    var table = TextTable(["ORIGIN", "FROM", "TYPE"])
    for action in actions {
      table.append([display(action["origin"]), display(action["from"]), display(action["type"])])
    }
    return table.text
  }

  /// `conflicts`: MUTATION, PAGE, TYPE, REASON (the reason's name, then the daemon's message if any).
  public static func conflicts(_ answer: JSONValue) throws(CLIFailure) -> String {
    guard let conflicts = answer.arrayValue else { throw wrongShape("a list", answer) }
    if conflicts.isEmpty { return "no conflicts" }
    var table = TextTable(["MUTATION", "PAGE", "TYPE", "REASON"])
    for conflict in conflicts {
      table.append([
        display(conflict["mutationId"]), display(conflict["page"]), display(conflict["type"]),
        reason(conflict),
      ])
    }
    return table.text
  }

  /// `sync`: what was pushed and fetched, and what is left.
  public static func sync(_ answer: JSONValue) throws(CLIFailure) -> String {
    guard answer.objectValue != nil else { throw wrongShape("an object", answer) }
    var line =
      "synced: pushed \(count(answer["pushed"], "mutation")), fetched \(count(answer["fetched"], "page"))"
    let pending = answer["pendingMutations"].map(display) ?? "-"
    let failed = answer["failedMutations"].map(display) ?? "-"
    line += "; \(pending) pending, \(failed) failed"
    if let failures = answer["failedMutations"]?.integerValue, failures > 0 {
      line += " (see pagesync conflicts)"
    }
    return line
  }

  /// `show ID`: the title, a few `key: value` lines, then properties, blocks in order, a database's rows in
  /// view and a page's inline databases.
  public static func page(_ answer: JSONValue) throws(CLIFailure) -> String {
    guard answer.objectValue != nil else { throw wrongShape("an object", answer) }
    var sections: [String] = []
    let title = answer["title"]?.stringValue ?? ""
    var head = KeyValueLines()
    head.append("id", display(answer["id"]))
    head.append("kind", display(answer["kind"]))
    head.append("parent", display(answer["parent"]))
    if answer["deleted"]?.boolValue == true { head.append("deleted", "yes") }
    if let view = answer["view"] { head.append("view", viewText(view)) }
    if let updated = answer["lastUpdatedTime"] { head.append("updated at", display(updated)) }
    var origin = display(answer["source"])
    if let status = answer["syncStatus"]?.stringValue { origin += " (\(status))" }
    head.append("source", origin)
    sections.append((title.isEmpty ? "(untitled)" : title).replacingControlCharacters() + "\n" + head.text)

    let properties = answer["properties"]?.objectValue ?? [:]
    if !properties.isEmpty {
      var table = TextTable(["PROPERTY", "VALUE"])
      for name in properties.keys.sorted() { table.append([name, display(properties[name])]) }
      sections.append(table.text)
    }
    let blocks = answer["blocks"]?.arrayValue ?? []
    if blocks.isEmpty {
      sections.append("no blocks")
    } else {
      var table = TextTable(["BLOCK", "TYPE", "TEXT", "MARKS"])
      for block in blocks {
        // `bold 0-5, link 6-9 https://…`: each mark's type, scalar range and value.
        let marks = (block["marks"]?.arrayValue ?? []).map { mark in
          let value = mark["value"]?.stringValue.map { " " + $0 } ?? ""
          return "\(display(mark["type"])) \(display(mark["start"]))-\(display(mark["end"]))\(value)"
        }
        table.append([
          display(block["id"]), display(block["type"]), display(block["text"]),
          marks.isEmpty ? "-" : marks.joined(separator: ", "),
        ])
      }
      sections.append(table.text)
    }
    if let rows = answer["rows"]?.arrayValue {
      sections.append(
        rows.isEmpty
          ? "no rows in view" : "rows in view:\n" + rows.map { "  " + display($0) }.joined(separator: "\n"))
    }
    if let databases = answer["databases"]?.arrayValue, !databases.isEmpty {
      sections.append("inline databases:\n" + databases.map { "  " + display($0) }.joined(separator: "\n"))
    }
    return sections.joined(separator: "\n\n")
  }

  // MARK: The change stream

  /// `watch`: one line for an event of the change stream, its words close to its JSON's:
  ///
  ///     sync: live, connected, 0 pending mutations
  ///     page home: changed (local)
  ///     page home: changed (remote, sequence 17)
  ///     page home: available offline
  ///     page NOPE: missing (the broker says it does not exist; kept until you remove it)
  ///     conflict: mutation 41 on page home rejected: page_deleted (see pagesync conflicts)
  ///     reset: events were lost (event 41 is not from this run of the daemon: re-read what you show)
  public static func event(_ event: PagesyncEvent) -> String {
    let line: String
    switch event.change {
    case .page(let page):
      var detail = page.source
      if let sequence = page.lastDownloadedTimestamp, page.source != "local" {
        detail += ", sequence \(sequence)"
      }
      line = "page \(page.id): \(page.deleted ? "deleted" : "changed") (\(detail))"
    case .offline(let offline):
      if offline.available {
        line = "page \(offline.id): available offline"
      } else if offline.missing {
        line = "page \(offline.id): missing (the broker says it does not exist; kept until you remove it)"
      } else {
        line = "page \(offline.id): no longer offline"
      }
    case .sync(let sync):
      let pending = sync.pendingMutations
      line =
        "sync: \(sync.state), \(sync.connected ? "connected" : "not connected"), "
        + "\(pending) pending \(pending == 1 ? "mutation" : "mutations")"
    case .conflict(let conflict):
      line =
        "conflict: mutation \(conflict.mutationId) on page \(conflict.page) rejected: \(conflict.reason) "
        + "(see pagesync conflicts)"
    case .reset(let reset):
      line = "reset: events were lost (\(reset.reason))"
    }
    return line.replacingControlCharacters()
  }

  // MARK: Pieces

  /// A value on one line: text as itself, numbers as written, `-` for null or missing, lists as `[a, b]`.
  static func display(_ value: JSONValue?) -> String {
    switch value {
    case nil, .null: "-"
    case .bool(let flag): flag ? "true" : "false"
    case .integer(let number): String(number)
    case .number(let number): JSONValue.numberText(number)
    case .string(let text): text
    case .array(let items): "[" + items.map(display).joined(separator: ", ") + "]"
    case .object: value!.jsonText
    }
  }

  /// A Unix time in milliseconds as UTC, `never` for null.
  static func time(_ value: JSONValue) -> String {
    guard let milliseconds = value.integerValue else { return value.isNull ? "never" : display(value) }
    return utcText(milliseconds: milliseconds)
  }

  /// `2026-11-22 04:58:04 UTC`.
  static func utcText(milliseconds: Int64) -> String { UTCText.of(milliseconds: milliseconds) }

  private static func yesNo(_ value: JSONValue?) -> String {
    guard let flag = value?.boolValue else { return display(value) }
    return flag ? "yes" : "no"
  }

  /// `3 mutations` from a count (or from a list, by its length).
  private static func count(_ value: JSONValue?, _ noun: String) -> String {
    let number: Int64? = value?.integerValue ?? value?.arrayValue.map { Int64($0.count) }
    guard let number else { return "- \(noun)s" }
    return "\(number) \(noun)\(number == 1 ? "" : "s")"
  }

  /// A conflict's reason: a name (`page_deleted`, or the `name` of a `{"code", "name"}` object), then `:
  /// message`.
  private static func reason(_ conflict: JSONValue) -> String {
    let value = conflict["reason"]
    let name = value?.stringValue ?? value?["name"]?.stringValue ?? conflict["code"].map(display) ?? "-"
    guard let message = conflict["message"]?.stringValue, !message.isEmpty, message != name else {
      return name
    }
    return "\(name): \(message)"
  }

  /// A database view: `filter Status = Done, sort Due descending`, or `creation order, no filter`.
  private static func viewText(_ view: JSONValue) -> String {
    var parts: [String] = []
    if let filter = view["filter"], !filter.isNull {
      parts.append("filter \(display(filter["property"])) = \(display(filter["value"]))")
    }
    if let sort = view["sort"], !sort.isNull {
      let direction = sort["descending"]?.boolValue == true ? "descending" : "ascending"
      parts.append("sort \(display(sort["property"])) \(direction)")
    }
    return parts.isEmpty ? "no filter, creation order" : parts.joined(separator: ", ")
  }

  private static func wrongShape(_ expected: String, _ answer: JSONValue) -> CLIFailure {
    .invalidAnswer("expected \(expected), got \(answer.jsonText.prefix(200))")
  }
}
