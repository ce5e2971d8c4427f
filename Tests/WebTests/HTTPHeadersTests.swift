import Testing

@testable import Web

/// Header names and values as every request and answer uses them: sanitized when added, looked up without ASCII
/// case; and a target's path and query. Each is read from the strings' bytes, so these cover the strings whose
/// bytes differ in shape: small (inline) and large, ASCII and not, and substrings.
@Suite struct HTTPHeadersTests {
  /// Small strings (up to 15 bytes, stored inline) and large ones, each with the three bytes at the start, in the
  /// middle and at the end, beside non-ASCII characters.
  @Test(arguments: [
    ("a\rb", "a b"), ("\nab", " ab"), ("ab\0", "ab "), ("\r\n\0", "   "),
    ("é\r\nEvil: 1", "é  Evil: 1"),
    (
      "a value long enough to be stored out of line\r\nEvil: 2",
      "a value long enough to be stored out of line  Evil: 2"
    ),
    ("😀 long enough to be stored out of line\0😀", "😀 long enough to be stored out of line 😀"),
  ])
  func crLFAndNULBecomeSpacesAndNothingElseChanges(raw: String, clean: String) {
    #expect(HTTPHeaders.sanitize(raw) == clean)
    var headers = HTTPHeaders()
    headers.add(name: raw, value: raw)
    #expect(headers.fields.first?.name == clean)
    #expect(headers.fields.first?.value == clean)
  }

  @Test(arguments: [
    "", "h", "Host", "é", "application/json; charset=utf-8", "😀 a value stored out of line ✓",
  ])
  func aCleanStringIsKeptAsItIs(text: String) {
    #expect(HTTPHeaders.sanitize(text) == text)
    #expect(Array(HTTPHeaders.sanitize(text).utf8) == Array(text.utf8))
  }

  @Test func namesMatchWithoutASCIICaseOnly() {
    #expect(HTTPHeaders.namesEqual("Content-Length", "content-length"))
    #expect(HTTPHeaders.namesEqual("X-LONG-HEADER-NAME-OUT-OF-LINE", "x-long-header-name-out-of-line"))
    #expect(HTTPHeaders.namesEqual("", ""))
    // Only ASCII letters fold: `[` and `{` differ by the same bit as `A` and `a`, and `É` is not `é`.
    #expect(!HTTPHeaders.namesEqual("[", "{"))
    #expect(!HTTPHeaders.namesEqual("X-É", "x-é"))
    #expect(HTTPHeaders.namesEqual("X-é", "x-é"))
    #expect(!HTTPHeaders.namesEqual("Host", "Hosts"))
    #expect(!HTTPHeaders.namesEqual("Host", "Hose"))
    // Substrings, as `contains(name:token:)` compares the parts of a list.
    let list = "keep-alive, Upgrade"
    let part = list.split(separator: ",")[1].trimmingSpaces
    #expect(HTTPHeaders.namesEqual(part, "upgrade"))
    #expect(!HTTPHeaders.namesEqual(part, "upgraded"))
  }

  @Test func lookupsIgnoreCaseAndFindEveryValue() {
    let headers: HTTPHeaders = ["Content-Type": "a", "connection": "keep-alive, Upgrade", "X-Several": "1"]
    var several = headers
    several.add(name: "x-several", value: "2")
    #expect(headers["content-type"] == "a")
    #expect(headers["CONTENT-TYPE"] == "a")
    #expect(headers["Content-Typ"] == nil)
    #expect(several.values(of: "X-SEVERAL") == ["1", "2"])
    #expect(headers.contains(name: "Connection", token: "upgrade"))
    #expect(!headers.contains(name: "Connection", token: "close"))
    // A token in the second of two fields of the name counts, as one in a list does.
    var twice = headers
    twice.add(name: "CONNECTION", value: " Close ")
    #expect(twice.contains(name: "connection", token: "close"))
    #expect(!twice.contains(name: "connection", token: "keep"))
    several.remove(name: "X-several")
    #expect(several.values(of: "x-several").isEmpty)
    #expect(several.count == 2)
  }

  /// The query starts at the first `?` byte. A combining mark after it makes `?` part of a grapheme cluster, which
  /// a search by `Character` does not find: the mark belongs to the query all the same.
  @Test(
    arguments: [
      ("/v1/batch", "/v1/batch", nil), ("/v1/pages?x=1", "/v1/pages", "x=1"), ("?", "", ""),
      ("/a?b?c", "/a", "b?c"), ("/pagés/é?q=ü", "/pagés/é", "q=ü"), ("/a?\u{301}b", "/a", "\u{301}b"),
      ("/😀?😀", "/😀", "😀"),
    ] as [(String, String, String?)])
  func pathAndQuerySplitAtTheFirstQuestionMark(target: String, path: String, query: String?) {
    let head = HTTPRequestHead(method: .GET, target: target)
    #expect(String(head.path) == path)
    #expect(head.query.map(String.init) == query)
  }
}
