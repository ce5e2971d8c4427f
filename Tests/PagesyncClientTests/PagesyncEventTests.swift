import Testing

@testable import PagesyncClient

#if canImport(Glibc)
  import Glibc
#endif

/// Reading one Server-Sent Event as a `PagesyncEvent` (the contract's JSON), and the client's own threads.
@Suite struct PagesyncEventTests {
  static func read(_ data: String, id: String? = "1", type: String = "message") throws -> PagesyncEvent? {
    try PagesyncEvent(ServerSentEvent(type: type, data: data, lastEventID: id ?? "", id: id))
  }

  @Test func theJSONsTypeDecidesAndUnknownFieldsAreIgnored() throws {
    // The `event:` line is left out (SSE's default type "message"): the JSON says what it is.
    let event = try Self.read(
      #"{"type":"sync","state":"catchingUp","connected":true,"pendingMutations":3,"x":{}}"#)
    #expect(event?.change == .sync(.init(state: "catchingUp", connected: true, pendingMutations: 3)))
    #expect(event?.id == 1)
  }

  @Test func optionalFlagsDefaultToFalse() throws {
    let page = try Self.read(#"{"type":"page","id":"a","lastDownloadedTimestamp":4,"source":"remote"}"#)
    #expect(
      page?.change == .page(.init(id: "a", lastDownloadedTimestamp: 4, source: "remote", deleted: false)))
    let offline = try Self.read(#"{"type":"offline","id":"a","available":false}"#)
    #expect(offline?.change == .offline(.init(id: "a", available: false, missing: false)))
  }

  @Test func unknownTypesAreSkippedNotFailed() throws {
    #expect(try Self.read(#"{"type":"presence","who":"ann"}"#) == nil)
  }

  @Test func theJSONIsKeptAsSent() throws {
    let text = #"{ "type" : "reset", "reason" : "window passed" }"#
    #expect(try Self.read(text)?.json == text)
  }

  @Test func aWrongTypeOrAMissingFieldNamesTheEvent() {
    #expect(
      throws: PagesyncEvent.DecodingFailure(
        description: "event 1 (conflict): \"mutationId\" is null or of the wrong type")
    ) {
      try Self.read(#"{"type":"conflict","mutationId":"41","page":"home","reason":"x"}"#)
    }
    #expect(throws: PagesyncEvent.DecodingFailure(description: "event 1 (reset): \"reason\" is missing")) {
      try Self.read(#"{"type":"reset"}"#)
    }
    #expect(throws: PagesyncEvent.DecodingFailure(description: "event -1: its id is not a decimal number")) {
      try Self.read(#"{"type":"reset","reason":"r"}"#, id: "-1")
    }
  }

  @Test func theClientsThreadsTakeNoneOfTheApplicationsSignals() async {
    let masks = await withCheckedContinuation { (continuation: CheckedContinuation<[Int32: Bool], Never>) in
      startDetachedThread {
        var mask = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &mask)
        var blocked: [Int32: Bool] = [:]
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPROF, SIGSEGV] {
          blocked[signal] = sigismember(&mask, signal) == 1
        }
        continuation.resume(returning: blocked)
      }
    }
    #expect(masks[SIGPIPE] == true && masks[SIGINT] == true && masks[SIGTERM] == true)
    #expect(masks[SIGHUP] == true && masks[SIGCHLD] == true)
    // The crash backtracer and profilers stop threads with SIGPROF; a bad access must still kill.
    #expect(masks[SIGPROF] == false && masks[SIGSEGV] == false)
  }

  @Test func aBrokenPipeInsideTheBlockLeavesNoSignalPendingAndTheMaskAsItWas() {
    var fds: [Int32] = [0, 0]
    #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    close(fds[1])
    var before = sigset_t()
    pthread_sigmask(SIG_BLOCK, nil, &before)
    let result = withBrokenPipeSignalBlocked { () -> (Int, Int32) in
      let byte: [UInt8] = [1]
      let written = byte.withUnsafeBytes { write(fds[0], $0.baseAddress, 1) }
      return (written, errno)
    }
    close(fds[0])
    #expect(result.0 == -1 && result.1 == EPIPE)
    var pending = sigset_t()
    sigpending(&pending)
    #expect(sigismember(&pending, SIGPIPE) == 0)
    var after = sigset_t()
    pthread_sigmask(SIG_BLOCK, nil, &after)
    #expect(sigismember(&after, SIGPIPE) == sigismember(&before, SIGPIPE))
  }
}
