import ByteBuffers
import EventLoop
import Testing
import Web

/// `HTTPResponder(request:onResponse:)`: a router's handlers driven without a connection.
@Suite struct DetachedResponderTests {
  func dispatch(_ router: HTTPRouter, _ request: HTTPRequest) -> [HTTPResponse] {
    var responses: [HTTPResponse] = []
    do {
      let responder = HTTPResponder(request: request.head) { responses.append($0) }
      switch router.resolve(request) {
      case .success(let handler): handler(request, responder)
      case .failure(let error): responder.respond(error.response)
      }
    }
    // The responder is gone: one the handler did not keep has answered by now.
    return responses
  }

  @Test func aHandlersAnswerComesBackOnceAsItWasGiven() {
    let router = HTTPRouter()
    var kept: HTTPResponder?
    router.add(.POST, "/echo") { request, responder in
      responder.respond(HTTPResponse(status: .created, headers: ["X-Seen": "yes"], body: request.body))
      responder.respond(.text(.ok, "a second answer is ignored"))
    }
    router.add(.GET, "/later") { _, responder in kept = responder }
    let echoed = dispatch(
      router, HTTPRequest(head: .init(method: .POST, target: "/echo"), body: .init(string: "hi")))
    #expect(echoed.map(\.status) == [.created])
    #expect(echoed.first?.headers["X-Seen"] == "yes" && echoed.first?.body == ByteBuffer(string: "hi"))
    #expect(
      dispatch(router, HTTPRequest(head: .init(method: .GET, target: "/nowhere"))).map(\.status) == [
        .notFound
      ])
    // Answered later: nothing until then.
    #expect(dispatch(router, HTTPRequest(head: .init(method: .GET, target: "/later"))).isEmpty)
    #expect(kept != nil)
  }

  @Test func aForgottenRequestIsAnswered500AndAStreamIsDeliveredWhole() {
    let router = HTTPRouter()
    router.add(.GET, "/forget") { _, _ in }
    router.add(.GET, "/stream") { _, responder in
      responder.startStreaming(HTTPResponseHead(status: .ok))
      responder.writeChunk(ByteBuffer(string: "one "))
      responder.writeChunk(ByteBuffer(string: "two"))
      responder.finish()
    }
    #expect(
      dispatch(router, HTTPRequest(head: .init(method: .GET, target: "/forget"))).map(\.status) == [
        .internalServerError
      ])
    let streamed = dispatch(router, HTTPRequest(head: .init(method: .GET, target: "/stream")))
    #expect(streamed.map(\.status) == [.ok])
    #expect(streamed.first?.body == ByteBuffer(string: "one two"))
  }
}
