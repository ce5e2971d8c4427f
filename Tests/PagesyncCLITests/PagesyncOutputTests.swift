import PagesyncCLI
import PagesyncClient
import Testing

/// The read commands: the request they make and their tables and lines, against answers shaped as
/// docs/protocol.md documents them.
@Suite struct PagesyncOutputTests {
  @Test func statusPrintsAlignedKeyValueLines() throws {
    let answer = #"""
      {"connected": true, "state": "live", "pendingMutations": 2, "failedMutations": 0, "offlinePages": 12,
       "lastSuccessfulSync": 1732244000123, "lastSyncAttempt": null, "fetchedPages": 40,
       "clientId": "laptop-7f3a", "workspace": "team", "broker": "http://127.0.0.1:7700"}
      """#
    let run = try runPagesync(["status"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let request = try run.onlyRequest()
    #expect(request.method == "GET")
    #expect(request.target == "/v1/status")
    #expect(
      run.output == """
        connected:            yes
        state:                live
        pending mutations:    2
        failed mutations:     0
        offline pages:        12
        fetched pages:        40
        last successful sync: 2024-11-22 02:53:20 UTC
        last sync attempt:    never
        client:               laptop-7f3a
        workspace:            team
        broker:               http://127.0.0.1:7700

        """)
  }

  @Test func statusShowsTheActivityFiguresWhenTheDaemonReportsThem() throws {
    let answer = #"""
      {"connected": true, "state": "live", "pendingMutations": 0, "failedMutations": 1, "offlinePages": 3,
       "lastSuccessfulSync": null, "lastSyncAttempt": null, "fetchedPages": 9, "clientId": "c", "workspace": "w",
       "broker": "http://b", "lastError": null, "batchesPushed": 4, "mutationsPushed": 7, "mutationsRejected": 1,
       "pushFailures": 2, "catchUpRequests": 3, "fetchRequests": 5, "notificationsReceived": 11,
       "reconnects": 2, "streamsOpened": 3, "bytesReceived": 123456, "bytesSent": 7890}
      """#
    let run = try runPagesync(["status"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(
      run.output == """
        connected:            yes
        state:                live
        pending mutations:    0
        failed mutations:     1
        offline pages:        3
        fetched pages:        9
        fetch requests:       5
        catch-ups:            3
        batches pushed:       4
        mutations pushed:     7
        mutations rejected:   1
        push failures:        2
        notifications:        11
        reconnects:           2
        bytes received:       123456
        bytes sent:           7890
        last successful sync: never
        last sync attempt:    never
        client:               c
        workspace:            w
        broker:               http://b

        """)
  }

  @Test func statusNamesTheTokenProblemAndTheLastError() throws {
    let answer = #"""
      {"connected": false, "state": "disconnected", "pendingMutations": 1, "failedMutations": 0,
       "offlinePages": 0, "fetchedPages": 0, "broker": "http://b", "tokenSource": "token_file",
       "tokenProblem": "the broker refused the token read from [broker] token_file (token expired); reading it again",
       "lastError": "the broker refused the token read from [broker] token_file (token expired); reading it again"}
      """#
    let run = try runPagesync(["status"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let lines = run.output.split(separator: "\n").map { line in
      line.split(separator: ":", maxSplits: 1).map { String($0.drop { $0 == " " }) }
    }
    #expect(lines.contains(["token", "token_file"]))
    #expect(
      lines.contains([
        "token problem",
        "the broker refused the token read from [broker] token_file (token expired); reading it again",
      ]))
    #expect(lines.contains { $0.first == "last error" && $0.last?.hasPrefix("the broker refused") == true })
  }

  @Test func offlineListIsATableOfReasons() throws {
    let answer = #"""
      [{"id": "D", "reasons": [{"origin": "D", "from": null, "type": "toggled"}],
        "lastDownloadedTimestamp": 17, "complete": true},
       {"id": "row-1", "reasons": [{"origin": "D", "from": "D", "type": "toggled"},
                                   {"origin": "X", "from": null, "type": "favorite"}],
        "lastDownloadedTimestamp": null, "complete": false}]
      """#
    let run = try runPagesync(["offline", "list"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let request = try run.onlyRequest()
    #expect(request.method == "GET")
    #expect(request.target == "/v1/offline")
    #expect(
      run.output == """
        ID     REASONS                DOWNLOADED  COMPLETE
        D      toggled:D              17          yes
        row-1  toggled:D, favorite:X  -           no

        """)
  }

  @Test func offlineListShowsAPageTheBrokerSaysIsMissingAndWhatBecomesOfIt() throws {
    let answer = #"""
      [{"id": "D", "reasons": [{"origin": "D", "from": null, "type": "toggled"}],
        "lastDownloadedTimestamp": 17, "complete": true, "missing": false},
       {"id": "NOPE", "reasons": [{"origin": "NOPE", "from": null, "type": "toggled"}],
        "lastDownloadedTimestamp": 0, "complete": false, "missing": true}]
      """#
    let run = try runPagesync(["offline", "list"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(
      run.output == """
        ID    REASONS       DOWNLOADED  COMPLETE
        D     toggled:D     17          yes
        NOPE  toggled:NOPE  0           missing

        missing: the broker says this device may not see this page (no such page, or another workspace's). \
        Kept as you asked until you remove the reason (offline remove, favorite remove); downloaded if the \
        broker has it later.

        """)
  }

  @Test func statusCountsMissingPages() throws {
    let answer = #"""
      {"connected": true, "state": "live", "pendingMutations": 0, "failedMutations": 0, "offlinePages": 2,
       "missingPages": 1, "lastSuccessfulSync": null, "lastSyncAttempt": null, "fetchedPages": 1}
      """#
    let run = try runPagesync(["status"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output.contains("offline pages:        2\nmissing pages:        1\n"), "\(run.output)")
  }

  @Test func offlineListOfNothingSaysSo() throws {
    let run = try runPagesync(["offline", "list"], answer: .ok("[]"))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output == "no page is offline\n")
  }

  @Test func whyIsATableOfOfflineActions() throws {
    let answer = #"""
      [{"origin": "home", "from": null, "type": "toggled"},
       {"origin": "home", "from": "tasks", "type": "toggled"},
       {"origin": "long-origin-page", "from": null, "type": "recent"}]
      """#
    let run = try runPagesync(["why", "t1"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let request = try run.onlyRequest()
    #expect(request.method == "GET")
    #expect(request.target == "/v1/why/t1")
    #expect(
      run.output == """
        ORIGIN            FROM   TYPE
        home              -      toggled
        home              tasks  toggled
        long-origin-page  -      recent

        """)
  }

  @Test func whyOfAPageNotOfflineSaysSo() throws {
    let run = try runPagesync(["why", "t1"], answer: .ok("[]"))
    #expect(run.output == "t1 is not offline\n")
  }

  @Test func conflictsIsATableWithTheReasonAndMessage() throws {
    let answer = #"""
      [{"mutationId": 41, "page": "home", "type": "set_title", "reason": "page_deleted", "code": 5,
        "message": "the page was deleted", "createdAt": 1732244000123},
       {"mutationId": 142, "page": "t1", "type": "add_block", "reason": "unknown_block", "code": 9,
        "createdAt": 1732244000456}]
      """#
    let run = try runPagesync(["conflicts"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let request = try run.onlyRequest()
    #expect(request.method == "GET")
    #expect(request.target == "/v1/conflicts")
    #expect(
      run.output == """
        MUTATION  PAGE  TYPE       REASON
        41        home  set_title  page_deleted: the page was deleted
        142       t1    add_block  unknown_block

        """)
  }

  @Test func showPrintsTitlePropertiesBlocksInOrderAndRows() throws {
    let answer = #"""
      {"id": "tasks", "kind": "database", "title": "Tasks", "parent": "home", "deleted": false,
       "properties": {"Status": "Open", "Points": 3, "Tags": ["a", "b"]},
       "blocks": [{"id": "b2", "type": "heading", "text": "Intro", "attributes": {}},
                  {"id": "b1", "type": "text", "text": "two\nlines", "attributes": {},
                   "marks": [{"type": "bold", "start": 0, "end": 3},
                             {"type": "link", "start": 4, "end": 9, "value": "https://x.example"}]}],
       "rows": ["t2", "t1"], "databases": [],
       "view": {"filter": {"property": "Status", "value": "Open"},
                "sort": {"property": "Points", "descending": true}},
       "lastUpdatedTime": 42, "source": "local", "syncStatus": "pending"}
      """#
    let run = try runPagesync(["show", "tasks"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    let request = try run.onlyRequest()
    #expect(request.method == "GET")
    #expect(request.target == "/v1/pages/tasks")
    #expect(
      run.output == #"""
        Tasks
        id:         tasks
        kind:       database
        parent:     home
        view:       filter Status = Open, sort Points descending
        updated at: 42
        source:     local (pending)

        PROPERTY  VALUE
        Points    3
        Status    Open
        Tags      [a, b]

        BLOCK  TYPE     TEXT        MARKS
        b2     heading  Intro       -
        b1     text     two\nlines  bold 0-3, link 4-9 https://x.example

        rows in view:
          t2
          t1

        """#)
  }

  @Test func showOfAPageWithInlineDatabases() throws {
    let answer = #"""
      {"id": "home", "kind": "page", "title": "", "properties": {}, "blocks": [], "databases": ["tasks"],
       "lastUpdatedTime": 3, "source": "broker", "syncStatus": "synced"}
      """#
    let run = try runPagesync(["show", "home"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(
      run.output == """
        (untitled)
        id:         home
        kind:       page
        parent:     -
        updated at: 3
        source:     broker (synced)

        no blocks

        inline databases:
          tasks

        """)
  }

  @Test func showJSONIsTheDaemonsAnswer() throws {
    let answer =
      #"{"id": "home", "kind": "page", "title": "Home", "properties": {}, "blocks": [], "rows": []}"#
    let run = try runPagesync(["show", "home", "--json"], answer: .ok(answer))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output == answer + "\n")
  }
}
