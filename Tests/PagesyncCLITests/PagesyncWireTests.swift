import PagesyncCLI
import PagesyncClient
import Testing

/// One command and the request docs/protocol.md ("The daemon's local API") says it makes.
struct WireCase: Sendable, CustomTestStringConvertible {
  var arguments: [String]
  var method: String
  var target: String
  /// The JSON body expected, nil for none.
  var body: String?
  var answer: CannedAnswer
  /// The whole human output expected (without `--json`).
  var output: String

  var testDescription: String { arguments.joined(separator: " ") }
}

private let queued7 = CannedAnswer.ok(#"{"id": "home", "mutationIds": [7]}"#)

private let wireCases: [WireCase] = [
  WireCase(
    arguments: ["create", "page", "--id", "home", "--title", "Home"], method: "POST", target: "/v1/pages",
    body: #"{"kind": "page", "id": "home", "title": "Home"}"#,
    answer: .created(#"{"id": "home", "mutationIds": [7]}"#),
    output: "created page home (queued mutation 7)\n"),
  WireCase(
    arguments: ["create", "page", "--id", "child", "--parent", "home"], method: "POST", target: "/v1/pages",
    body: #"{"kind": "page", "id": "child", "parent": "home"}"#,
    answer: .created(#"{"id": "child", "mutationIds": [8]}"#),
    output: "created page child (queued mutation 8)\n"),
  WireCase(
    arguments: ["create", "database", "--id", "tasks", "--parent", "home", "--title", "Tasks"],
    method: "POST",
    target: "/v1/pages", body: #"{"kind": "database", "id": "tasks", "parent": "home", "title": "Tasks"}"#,
    answer: .created(#"{"id": "tasks", "mutationIds": [9]}"#),
    output: "created database tasks (queued mutation 9)\n"),
  WireCase(
    arguments: [
      "create", "row", "--database", "tasks", "--id", "t1", "--title", "Write tests", "--set", "Status=Done",
      "--set", "Points=3", "--set", "Urgent=true", "--set", #"Tags=["a","b"]"#, "--set", "Note=",
      "--set", "Quoted=\"3\"",
    ],
    method: "POST", target: "/v1/pages",
    body: #"""
      {"kind": "row", "id": "t1", "database": "tasks", "title": "Write tests",
       "properties": {"Status": "Done", "Points": 3, "Urgent": true, "Tags": ["a", "b"], "Note": "",
                      "Quoted": "\"3\""}}
      """#,
    answer: .created(#"{"id": "t1", "mutationIds": [10, 11]}"#),
    output: "created row t1 in database tasks (queued mutations 10, 11)\n"),
  WireCase(
    arguments: [
      "edit", "home", "--title", "Start", "--set", "Score=2.5", "--set", "Formula=a=b", "--unset", "Old",
    ],
    method: "PATCH", target: "/v1/pages/home",
    body: #"{"title": "Start", "properties": {"Score": 2.5, "Formula": "a=b", "Old": null}}"#,
    answer: .ok(#"{"id": "home", "mutationIds": [12, 13, 14]}"#),
    output: "edited page home (queued mutations 12, 13, 14)\n"),
  WireCase(
    arguments: ["delete", "home"], method: "DELETE", target: "/v1/pages/home", body: nil, answer: queued7,
    output: "deleted page home (queued mutation 7)\n"),
  WireCase(
    arguments: [
      "block", "add", "home", "--id", "b2", "--text", "Hello\nworld", "--after", "b1", "--type", "todo",
    ],
    method: "POST", target: "/v1/pages/home/blocks",
    body: #"{"id": "b2", "text": "Hello\nworld", "after": "b1", "type": "todo"}"#,
    answer: .created(#"{"id": "b2", "page": "home", "mutationIds": [15]}"#),
    output: "added block b2 to page home (queued mutation 15)\n"),
  WireCase(
    arguments: ["block", "add", "home", "--id", "b1", "--text", "First"], method: "POST",
    target: "/v1/pages/home/blocks", body: #"{"id": "b1", "text": "First"}"#,
    answer: .created(#"{"id": "b1", "page": "home", "mutationIds": [16]}"#),
    output: "added block b1 to page home (queued mutation 16)\n"),
  WireCase(
    arguments: ["block", "edit", "b1", "--text", "Changed"], method: "PATCH", target: "/v1/blocks/b1",
    body: #"{"text": "Changed"}"#, answer: .ok(#"{"id": "b1", "page": "home", "mutationIds": [17]}"#),
    output: "edited block b1 of page home (queued mutation 17)\n"),
  WireCase(
    arguments: ["block", "delete", "b1"], method: "DELETE", target: "/v1/blocks/b1", body: nil,
    answer: .ok(#"{"id": "b1", "page": "home", "mutationIds": [18]}"#),
    output: "deleted block b1 of page home (queued mutation 18)\n"),
  WireCase(
    arguments: ["view", "set", "tasks", "--filter", "Status=Done", "--sort", "Due:desc"], method: "PUT",
    target: "/v1/pages/tasks/view",
    body: #"""
      {"filter": {"property": "Status", "value": "Done"}, "sort": {"property": "Due", "descending": true}}
      """#,
    answer: .ok(#"{"id": "tasks", "mutationIds": [19]}"#),
    output: "set the view of database tasks (queued mutation 19)\n"),
  WireCase(
    arguments: ["view", "set", "tasks", "--sort", "Points", "--filter", "Points=3"], method: "PUT",
    target: "/v1/pages/tasks/view",
    body:
      #"{"filter": {"property": "Points", "value": 3}, "sort": {"property": "Points", "descending": false}}"#,
    answer: .ok(#"{"id": "tasks", "mutationIds": [20]}"#),
    output: "set the view of database tasks (queued mutation 20)\n"),
  WireCase(
    arguments: ["view", "set", "tasks"], method: "PUT", target: "/v1/pages/tasks/view",
    body: #"{"filter": null, "sort": null}"#, answer: .ok(#"{"id": "tasks", "mutationIds": [21]}"#),
    output: "set the view of database tasks (queued mutation 21)\n"),
  WireCase(
    arguments: ["offline", "add", "home"], method: "PUT", target: "/v1/offline/home", body: nil,
    answer: .ok(#"{"id": "home", "offlinePages": 12}"#), output: "home is toggled offline; 12 pages offline\n"
  ),
  WireCase(
    arguments: ["offline", "remove", "home"], method: "DELETE", target: "/v1/offline/home", body: nil,
    answer: .ok(#"{"id": "home", "offlinePages": 1}"#),
    output: "home is no longer toggled offline; 1 page offline\n"),
  WireCase(
    arguments: ["favorite", "add", "home"], method: "PUT", target: "/v1/favorites/home", body: nil,
    answer: .ok(#"{"id": "home", "offlinePages": 3}"#), output: "home is a favorite; 3 pages offline\n"),
  WireCase(
    arguments: ["favorite", "remove", "home"], method: "DELETE", target: "/v1/favorites/home", body: nil,
    answer: .ok(#"{"id": "home", "offlinePages": 0}"#),
    output: "home is no longer a favorite; 0 pages offline\n"),
  WireCase(
    arguments: ["visit", "home"], method: "POST", target: "/v1/visits/home", body: nil,
    answer: .ok(#"{"id": "home", "offlinePages": 4}"#), output: "visit of home recorded; 4 pages offline\n"),
  WireCase(
    arguments: ["sync"], method: "POST", target: "/v1/sync", body: nil,
    answer: .ok(#"{"pushed": 3, "fetched": 1, "pendingMutations": 0, "failedMutations": 1}"#),
    output: "synced: pushed 3 mutations, fetched 1 page; 0 pending, 1 failed (see pagesync conflicts)\n"),
]

/// Each command against a fake daemon: the method, path and JSON body it sends, and what it prints.
@Suite struct PagesyncWireTests {
  @Test(arguments: wireCases) func commandSendsItsRequestAndPrintsItsAnswer(_ wire: WireCase) throws {
    let run = try runPagesync(wire.arguments, answer: wire.answer)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.errorOutput == "")
    let request = try run.onlyRequest()
    #expect(request.method == wire.method)
    #expect(request.target == wire.target)
    if let body = wire.body {
      #expect(try request.json() == json(body), "sent \(String(decoding: request.body, as: UTF8.self))")
      #expect(request.contentType == "application/json")
    } else {
      #expect(request.body.isEmpty, "sent \(String(decoding: request.body, as: UTF8.self))")
    }
    #expect(run.output == wire.output)
  }

  @Test(arguments: wireCases) func jsonPrintsTheDaemonsAnswerAsOneValue(_ wire: WireCase) throws {
    let run = try runPagesync(wire.arguments + ["--json"], answer: wire.answer)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output == wire.answer.body + "\n")
    #expect(try JSONValue(parsing: Array(run.output.utf8)) == json(wire.answer.body))
  }

  @Test func aNumberTypedAsTextWithAFractionIsSentAsANumber() throws {
    let run = try runPagesync(
      ["edit", "home", "--set", "N=1e3", "--set", "M=-0.5", "--set", "S=12abc"], answer: queued7)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(try run.onlyRequest().json() == json(#"{"properties": {"N": 1000, "M": -0.5, "S": "12abc"}}"#))
  }
}
