import Testing

@testable import TOMLConfig

/// The C shim over toml++ (CTOML) and its reading into `TOMLNode`: every kind of value, nesting, positions, and
/// toml++'s own errors with their lines.
@Suite struct TOMLDocumentTests {
  @Test func everyKindOfValueComesThroughWithItsLine() throws {
    let root = try TOMLNode.parse(
      """
      s = "a\\u0000b é"
      i = -9223372036854775808
      f = 2.5
      b = true
      d = 1979-05-27T07:32:00Z
      [t]
      a = [1, "x", [2]]
      [[list]]
      n = 1
      [[list]]
      n = 2
      """)
    #expect(root["s"]?.string == "a\u{0}b é")
    #expect(root["i"]?.int == Int.min)
    #expect(root["i"]?.line == 2)
    if case .float(let value)? = root["f"]?.value { #expect(value == 2.5) } else { Issue.record("f") }
    #expect(root["b"]?.bool == true)
    if case .dateTime? = root["d"]?.value {} else { Issue.record("d") }
    #expect(root["f"]?.int == nil)
    let array = try #require(root["t"]?.table?["a"]?.array)
    #expect(array.count == 3)
    #expect(array[0].int == 1)
    #expect(array[1].string == "x")
    #expect(array[2].array?.first?.int == 2)
    #expect(root["t"]?.table?["a"]?.line == 7)
    let list = try #require(root["list"]?.array)
    #expect(list.map { $0.table?["n"]?.int } == [1, 2])
    #expect(list.map(\.line) == [8, 10])
  }

  @Test func syntaxErrorsAreTomlPlusPlusOwnWithTheirLine() {
    #expect(throws: TOMLSyntaxError.self) { try TOMLNode.parse("a = 1\nb = 99999999999999999999\n") }
    do {
      _ = try TOMLNode.parse("[a]\nx = 1\ny = = 2\n")
      Issue.record("parsed")
    } catch {
      #expect(error.line == 3)
      #expect(error.message.contains("could not determine value type"), "\(error.message)")
    }
    do {
      _ = try TOMLNode.parse("a = 1\na = 2\n")
      Issue.record("parsed")
    } catch {
      #expect(error.line == 2)
      #expect(error.message.contains("cannot redefine existing integer 'a'"), "\(error.message)")
    }
  }

  @Test func anEmptyDocumentIsAnEmptyTable() throws {
    #expect(try TOMLNode.parse("").isEmpty)
    #expect(try TOMLNode.parse("# only a comment\n").isEmpty)
  }
}
