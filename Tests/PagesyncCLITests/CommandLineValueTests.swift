import PagesyncClient
import SyncModel
import Testing

@testable import PagesyncCLI

/// The pure pieces: `NAME=VALUE`, `NAME[:desc]`, JSON text, times and tables.
@Suite struct CommandLineValueTests {
  @Test func assignmentSplitsAtTheFirstEqualsAndFollowsTheValueRule() throws {
    #expect(
      try PropertyAssignment(parsing: "Status=Done")
        == PropertyAssignment(name: "Status", value: .string("Done")))
    #expect(try PropertyAssignment(parsing: "F=a=b").value == .string("a=b"))
    #expect(try PropertyAssignment(parsing: "N=42").value == .number(42))
    #expect(try PropertyAssignment(parsing: "B=false").value == .bool(false))
    #expect(try PropertyAssignment(parsing: #"L=["x"]"#).value == .list(["x"]))
    #expect(try PropertyAssignment(parsing: "Empty=").value == .string(""))
    #expect(try PropertyAssignment(parsing: "Null=null").value == .string("null"))
    #expect(throws: CommandLineValueError.self) { try PropertyAssignment(parsing: "NoEquals") }
    #expect(throws: CommandLineValueError.self) { try PropertyAssignment(parsing: "=value") }
  }

  @Test func sortTakesAnOptionalDirection() throws {
    #expect(try SortOrder(parsing: "Due") == SortOrder(property: "Due", descending: false))
    #expect(try SortOrder(parsing: "Due:desc") == SortOrder(property: "Due", descending: true))
    #expect(try SortOrder(parsing: "Due:asc") == SortOrder(property: "Due", descending: false))
    #expect(try SortOrder(parsing: "a:b") == SortOrder(property: "a:b", descending: false))
    #expect(try SortOrder(parsing: "x:desc:asc") == SortOrder(property: "x:desc", descending: false))
    #expect(throws: CommandLineValueError.self) { try SortOrder(parsing: ":desc") }
  }

  @Test func jsonTextEscapesAndKeepsWholeNumbersWhole() throws {
    let value = JSONValue.object([
      "b": .array([.number(3), .number(2.5), .integer(-7), .null, .bool(true)]),
      "a": .string("quote \" back \\ nl \n tab \t bell \u{7}"),
    ])
    #expect(value.jsonText == #"{"a":"quote \" back \\ nl \n tab \t bell \u0007","b":[3,2.5,-7,null,true]}"#)
    #expect(try JSONValue(parsing: Array(value.jsonText.utf8)) == value.normalizingWholeNumbers)
  }

  @Test func parsingRefusesTrailingGarbageAndTruncation() {
    #expect(throws: JSONValue.ParseError.self) { try JSONValue(parsing: Array("{} x".utf8)) }
    #expect(throws: JSONValue.ParseError.self) { try JSONValue(parsing: Array(#"{"a": "#.utf8)) }
    #expect(throws: JSONValue.ParseError.self) { try JSONValue(parsing: []) }
  }

  @Test func utcTextIsTheCivilDate() {
    #expect(HumanOutput.utcText(milliseconds: 0) == "1970-01-01 00:00:00 UTC")
    #expect(HumanOutput.utcText(milliseconds: 951_782_400_000) == "2000-02-29 00:00:00 UTC")
    #expect(HumanOutput.utcText(milliseconds: 1_732_244_000_123) == "2024-11-22 02:53:20 UTC")
    #expect(HumanOutput.utcText(milliseconds: -1) == "1969-12-31 23:59:59 UTC")
  }

  @Test func tableColumnsAlignAndCellsStayOnOneLine() {
    var table = TextTable(["A", "LONGER", "C"])
    table.append(["wide cell", "x", "last\nline"])
    table.append(["é", "", ""])
    #expect(
      table.text == """
        A          LONGER  C
        wide cell  x       last\\nline
        é
        """)
  }
}

extension JSONValue {
  /// The value as it reads back from its text: whole numbers come back as integers.
  fileprivate var normalizingWholeNumbers: JSONValue {
    switch self {
    case .number(let value) where value.rounded() == value: .integer(Int64(value))
    case .array(let items): .array(items.map(\.normalizingWholeNumbers))
    case .object(let members): .object(members.mapValues(\.normalizingWholeNumbers))
    default: self
    }
  }
}
