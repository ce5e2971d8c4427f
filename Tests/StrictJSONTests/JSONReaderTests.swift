import EventLoopTestKit
import FoundationEssentials
import StrictJSON
import StrictJSONTestKit
import Testing

/// The grammar: what strict JSON is (RFC 8259), each text checked against the independent parser of the test
/// kit too, and each refusal's message.
@Suite struct JSONReaderGrammarTests {
  @Test(arguments: [
    "{}", "[]", "0", "-0", "-0.0e-0", "1E+2", "1e05", "123456789012345678901234567890",
    #""\u00e9\ud83d\ude00""#,
    #""\/\"\\\b\f\n\r\t""#, " \t\n\r[1 , 2]\r\n", "\u{FEFF}{}", "\"\u{7F}\"", #"{"a":{"a":[]}}"#,
    #""\u0000""#,
    "[true,false,null]", "\"\u{E9}\u{1F600}\u{FFFF}\"", #""\uDBFF\uDFFF""#, #"{"":1,"a":2,"a":3}"#, "1.5e308",
    "[[[[[[[[[[]]]]]]]]]]", "-1.25E-10", "\"\u{2028}\"",
  ])
  func acceptsStrictJSON(_ text: String) {
    #expect(TestJSON.isStrictJSON(bytes(text)), "the test kit's parser refuses \(text.debugDescription)")
    #expect(
      strictError(Skipped.self, bytes(text)) == nil,
      "\(text.debugDescription): \(String(describing: strictError(Skipped.self, bytes(text))))")
  }

  @Test(arguments: [
    ("", "unexpected end of input, expecting a value (byte 0)"),
    ("\u{FEFF}", "unexpected end of input, expecting a value (byte 3)"),
    ("[1,]", "trailing comma before ']' (byte 3)"),
    (#"{"a":1,}"#, "trailing comma before '}' (byte 7)"),
    ("[,1]", "at [0]: expected a value, found ',' (byte 1)"),
    ("{,}", "expected a string key, found ',' (byte 1)"),
    ("[1 2]", "expected ',' or ']' after an array element, found '2' (byte 3)"),
    (#"{"a" 1}"#, "expected ':' after an object key, found '1' (byte 5)"),
    ("{'a':1}", "expected a string key, found ''' (byte 1)"),
    ("{a:1}", "expected a string key, found 'a' (byte 1)"),
    ("01", "invalid number: a leading zero (byte 0)"),
    ("-01", "invalid number: a leading zero (byte 0)"),
    ("1.", "invalid number: a digit must follow '.' (byte 0)"),
    (".5", "expected a value, found '.' (byte 0)"),
    ("+1", "expected a value, found '+' (byte 0)"),
    ("-", "invalid number: a digit must follow '-' (byte 0)"),
    ("-a", "invalid number: a digit must follow '-' (byte 0)"),
    ("1e", "invalid number: a digit must follow the exponent's 'e' (byte 0)"),
    ("1e+", "invalid number: a digit must follow the exponent's 'e' (byte 0)"),
    ("0x10", "invalid number (byte 0)"),
    ("1.2.3", "invalid number (byte 0)"),
    ("[1e5e5]", "at [0]: invalid number (byte 1)"),
    ("NaN", "expected a value, found 'N' (byte 0)"),
    ("Infinity", "expected a value, found 'I' (byte 0)"),
    ("-Infinity", "invalid number: a digit must follow '-' (byte 0)"),
    ("tru", "invalid literal (expected true) (byte 0)"),
    ("nulll", "invalid literal (expected null) (byte 0)"),
    ("[True]", "at [0]: expected a value, found 'T' (byte 1)"),
    (#""\x""#, #"invalid escape '\x' in a string (byte 1)"#),
    (#""\'""#, #"invalid escape '\'' in a string (byte 1)"#),
    (#""\u12""#, #"unexpected end of input in a \u escape (byte 3)"#),
    (#""\u12" "#, #"invalid \u escape: '"' is not a hex digit (byte 5)"#),
    (#""\u12G4""#, #"invalid \u escape: 'G' is not a hex digit (byte 5)"#),
    (#""ab\ud800""#, #"lone surrogate \ud800 in a string (byte 3)"#),
    (#""\udc00""#, #"lone surrogate \udc00 in a string (byte 1)"#),
    (#""\ud800\u0041""#, #"lone surrogate \ud800 in a string (byte 1)"#),
    (#""\udc00\ud800""#, #"lone surrogate \udc00 in a string (byte 1)"#),
    ("\"a\tb\"", "control character 0x9 in a string (write it escaped) (byte 2)"),
    ("\"a\u{0}b\"", "control character 0x0 in a string (write it escaped) (byte 2)"),
    ("\"abc", "unterminated string (it opens at byte 0) (byte 4)"),
    (#"{"a":"abcdefghijklmnopqrstuvwxyz"#, "at a: unterminated string (it opens at byte 5) (byte 32)"),
    ("[1]x", "unexpected 'x' after the JSON value (byte 3)"),
    ("{}{}", "unexpected '{' after the JSON value (byte 2)"),
    ("[1] /*c*/", "unexpected '/' after the JSON value (byte 4)"),
    (#"{"a":1 /*c*/}"#, "expected ',' or '}' after an object member, found '/' (byte 7)"),
    ("\u{0C}[]", "expected a value, found byte 0xC (byte 0)"),
    ("[\u{A0}1]", "at [0]: expected a value, found byte 0xC2 (byte 1)"),
    (#"{"a":[{"b":[1,]}]}"#, "at a[0].b: trailing comma before ']' (byte 14)"),
    ("{\0\"\0a\0\"\0:\01\0}\0", "expected a string key, found byte 0x0 (byte 1)"),
  ])
  func refusesWhatIsNotStrictJSONSayingWhereAndWhy(_ text: String, _ message: String) {
    #expect(!TestJSON.isStrictJSON(bytes(text)), "the test kit's parser accepts \(text.debugDescription)")
    let error = strictError(Skipped.self, bytes(text))
    #expect(error?.kind == .syntax)
    #expect(error?.description == message, "\(text.debugDescription)")
  }

  @Test(
    arguments: [
      ([0x22, 0xFF, 0x22], 1), ([0x22, 0xC0, 0x80, 0x22], 1), ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),
      ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1), ([0x22, 0x61, 0xE2, 0x82, 0x22], 2),
      ([0x22, 0xE2, 0x82], 1),
      ([0x22, 0x80, 0x22], 1), ([0x5B, 0xC3, 0xA9, 0x5D], 1),
    ] as [([UInt8], Int)])
  func refusesInvalidUTF8(_ input: [UInt8], _ offset: Int) {
    #expect(!TestJSON.isStrictJSON(input))
    let error = strictError(Skipped.self, input)
    #expect(error?.kind == .syntax)
    #expect(error?.offset == offset)
    if input.first == 0x22 { #expect(error?.message == "invalid UTF-8 in a string") }
  }

  /// `JSONDecoder`'s limit, the same for both: 512 levels of arrays and objects.
  @Test func nestsAsDeepAsJSONDecoderAndNoDeeper() {
    for (levels, accepted) in [(511, true), (512, true), (513, false), (100_000, false)] {
      for arrays in [true, false] {
        // Inside an object whose one member the type reads (a level): the rest is only parsed, by both.
        let inner =
          arrays
          ? String(repeating: "[", count: levels - 1) + String(repeating: "]", count: levels - 1)
          : String(repeating: #"{"k":"#, count: levels - 2) + "{}" + String(repeating: "}", count: levels - 2)
        let text = bytes(#"{"v":"a","x":"# + inner + "}")
        let opening = arrays ? "arrays" : "objects"
        let outcome = DecodingAgreement.check(Box<String>.self, text)
        if accepted {
          #expect(outcome == .bothAccepted, "\(levels) levels of \(opening)")
        } else {
          #expect(outcome == .notStrictJSON(foundationAccepted: false), "\(levels) levels of \(opening)")
          #expect(strictError(Box<String>.self, text)?.message == "more than 512 nested arrays and objects")
        }
      }
    }
  }

  /// The reader and the test kit's parser are two implementations of one grammar: on random values in random
  /// spellings, and on those damaged, they accept the same texts, and the parser reads back what was written.
  @Test func acceptsExactlyWhatTheIndependentParserAccepts() {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0301)
    var accepted = 0
    var refused = 0
    for round in 0..<4000 {
      let value = JSONMutator.randomValue(depth: 4, using: &random)
      var style = TestJSON.Style.random(using: &random)
      let respelling = style.respelling
      style.respelling = 0
      #expect(
        TestJSON(parsing: value.text(style, using: &random)) == value,
        "round \(round): the kit's writer and parser disagree")
      style.respelling = respelling
      let input =
        round % 2 == 0 ? value.text(style, using: &random) : JSONMutator.mutate(value, using: &random)
      let expected = TestJSON.isStrictJSON(input)
      let error = strictError(Skipped.self, input)
      #expect(
        (error == nil) == expected,
        "round \(round): \(String(decoding: input, as: UTF8.self).debugDescription): \(String(describing: error))"
      )
      if let error { #expect(error.isSyntaxError) }
      if expected { accepted += 1 } else { refused += 1 }
    }
    #expect(accepted > 2500 && refused > 500, "accepted \(accepted), refused \(refused)")
  }

  /// Every split of a text is refused as incomplete: no prefix of a value is a value, until it is whole.
  @Test func refusesEveryTruncationOfAnObject() {
    let text = bytes(#" {"a" : [1, -2.5e3, "x\u00e9\n", true, null, {"b": false}], "c": "\ud83d\ude00"} "#)
    #expect(strictError(Skipped.self, text) == nil)
    for end in 0..<text.count - 1 {
      let prefix = Array(text[..<end])
      #expect(strictError(Skipped.self, prefix)?.kind == .syntax, "\(end)")
    }
  }
}

/// Numbers: what each field type reads, next to what `JSONDecoder` reads.
@Suite struct JSONReaderNumberTests {
  enum Expected: Sendable, CustomTestStringConvertible {
    case value(String)
    case refusedByBoth(JSONReadError.Kind)
    case inexact
    var testDescription: String {
      switch self {
      case .value(let text): "reads \(text)"
      case .refusedByBoth(let kind): "refused (\(kind))"
      case .inexact: "refused (inexact; JSONDecoder rounds)"
      }
    }
  }

  static func check<V: Codable & JSONReadable>(_ type: V.Type, _ number: String, _ expected: Expected) {
    let text = bytes(#"{"v":"# + number + "}")
    let outcome = DecodingAgreement.check(Box<V>.self, text)
    switch expected {
    case .value(let written):
      #expect(outcome == .bothAccepted, "\(number)")
      #expect(
        String(
          decoding: DecodingAgreement.encoded(try? JSONReader.decode(Box<V>.self, from: text)), as: UTF8.self)
          == #"{"v":"# + written + "}", "\(number)")
    case .refusedByBoth(let kind):
      guard case .bothRefused = outcome else {
        Issue.record("\(number): \(outcome)")
        return
      }
      #expect(strictError(Box<V>.self, text)?.kind == kind, "\(number)")
    case .inexact:
      #expect(outcome == .inexactInteger, "\(number)")
    }
  }

  @Test(arguments: [
    ("0", Expected.value("0")), ("-0", .value("0")), ("42", .value("42")),
    ("18446744073709551615", .value("18446744073709551615")),
    ("18446744073709551616", .refusedByBoth(.numberDoesNotFit)),
    ("10000000000000000000000000000", .refusedByBoth(.numberDoesNotFit)),
    ("-1", .refusedByBoth(.numberDoesNotFit)), ("-0.5", .refusedByBoth(.numberDoesNotFit)),
    ("1.0", .value("1")), ("1e2", .value("100")), ("1E+2", .value("100")), ("0.1e1", .value("1")),
    ("100e-2", .value("1")), ("-0.0", .value("0")), ("0e400", .value("0")), ("0.0e-5", .value("0")),
    ("1e0000000000000000000002", .value("100")), ("9007199254740991.0", .value("9007199254740991")),
    ("450359962737049.5e1", .value("4503599627370495")),
    ("1.5", .refusedByBoth(.numberDoesNotFit)), ("1e20", .refusedByBoth(.numberDoesNotFit)),
    ("1e-0000000000000000000001", .refusedByBoth(.numberDoesNotFit)),
    ("18446744073709551615.0", .refusedByBoth(.numberDoesNotFit)),
    ("1.00000000000000000000000000001", .inexact), ("1e-400", .inexact), ("9007199254740992.0", .inexact),
    ("9007199254740993.0", .inexact), ("9007199254740993.5", .inexact), ("1000000000000000000.9", .inexact),
    ("1.8446744073709549568e19", .inexact), ("true", .refusedByBoth(.typeMismatch)),
    ("\"1\"", .refusedByBoth(.typeMismatch)), ("null", .refusedByBoth(.nullValue)),
  ])
  func readsUInt64sAsJSONDecoderDoesOrMoreStrictly(_ number: String, _ expected: Expected) {
    Self.check(UInt64.self, number, expected)
  }

  @Test(arguments: [
    ("-9223372036854775808", Expected.value("-9223372036854775808")),
    ("9223372036854775807", .value("9223372036854775807")),
    ("9223372036854775808", .refusedByBoth(.numberDoesNotFit)),
    ("-9223372036854775809", .refusedByBoth(.numberDoesNotFit)), ("-1e3", .value("-1000")),
    ("-9007199254740991.0", .value("-9007199254740991")), ("-9007199254740993.5", .inexact),
    ("9223372036854775807.0", .refusedByBoth(.numberDoesNotFit)), ("-0.0", .value("0")),
  ])
  func readsIntsAsJSONDecoderDoesOrMoreStrictly(_ number: String, _ expected: Expected) {
    Self.check(Int.self, number, expected)
  }

  @Test(arguments: [
    ("0.1", Expected.value("0.1")), ("-0", .value("-0")), ("-0.0", .value("-0")), ("1E2", .value("100")),
    ("0.30000000000000004", .value("0.30000000000000004")), ("1e22", .value("1e+22")),
    ("1e23", .value("1e+23")),
    ("9007199254740993", .value("9007199254740992")),
    ("123456789012345678901234567890", .value("1.2345678901234568e+29")),
    ("1.7976931348623157e308", .value("1.7976931348623157e+308")),
    ("1.7976931348623158079e308", .value("1.7976931348623157e+308")),
    ("1.7976931348623159e308", .refusedByBoth(.numberOutOfRange)),
    ("1e400", .refusedByBoth(.numberOutOfRange)),
    ("-1e400", .refusedByBoth(.numberOutOfRange)), ("1e-400", .refusedByBoth(.numberOutOfRange)),
    ("2.4703282292062327e-324", .refusedByBoth(.numberOutOfRange)),
    ("2.4703282292062328e-324", .value("5e-324")), ("4.9e-324", .value("5e-324")),
    ("1e-310", .value("1e-310")),
    ("0e-400", .value("0")), ("2.2250738585072011e-308", .value("2.225073858507201e-308")),
    ("100000000000000000000000e-330", .value("1e-307")),
    ("0.000000000000000000000000000000000000000001", .value("1e-42")),
    ("true", .refusedByBoth(.typeMismatch)), ("null", .refusedByBoth(.nullValue)),
  ])
  func readsDoublesAsJSONDecoderDoes(_ number: String, _ expected: Expected) {
    Self.check(Double.self, number, expected)
  }

  /// Random doubles in their shortest spelling and respelled, random decimal texts of every length and
  /// exponent: the strict reader rounds each to the same double as `JSONDecoder` (strtod), bit for bit.
  @Test func roundsEveryDecimalAsJSONDecoderDoes() {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0302)
    for round in 0..<6000 {
      let text: String
      switch round % 3 {
      case 0:
        let double = Double(bitPattern: random.next())
        text = double.isFinite ? "\(double)".replacing("e+", with: "e") : "1"
      case 1:
        let digits = (0..<Int.random(in: 1...40, using: &random)).map { _ in
          String(Int.random(in: 0...9, using: &random))
        }
        .joined()
        let point = Int.random(in: 1...digits.count, using: &random)
        var written = String(digits.prefix(point)).drop { $0 == "0" }
        if written.isEmpty { written = "0" }
        let fraction = digits.dropFirst(point)
        text =
          (Bool.random(using: &random) ? "-" : "") + written + (fraction.isEmpty ? "" : "." + fraction)
          + "e" + String(Int.random(in: -340...320, using: &random))
      default:
        text = TestJSON.respell(
          String(Int.random(in: -99_999_999...99_999_999, using: &random)), using: &random)
      }
      let input = bytes(#"{"v":"# + text + "}")
      let outcome = DecodingAgreement.check(Box<Double>.self, input)
      switch outcome {
      case .bothAccepted, .bothRefused: break
      default: Issue.record("\(text): \(outcome)")
      }
    }
  }
}

/// Strings, keys, duplicates, null and absent: what `JSONDecoder` reads, read the same.
@Suite struct JSONReaderValueTests {
  @Test(arguments: [
    (#""a""#, "a"), (#""\u00e9""#, "\u{E9}"), (#""\ud83d\ude00""#, "\u{1F600}"),
    (#""\uD83D\uDE00""#, "\u{1F600}"),
    (#""\/\"\\\b\f\n\r\t""#, "/\"\\\u{8}\u{C}\n\r\t"), (#""\u0000""#, "\u{0}"), ("\"a\u{7F}b\"", "a\u{7F}b"),
    ("\"e\u{301}\"", "e\u{301}"), (#""\uDBFF\uDFFF""#, "\u{10FFFF}"), (#""ab\u0063d""#, "abcd"), (#""""#, ""),
  ])
  func readsStringsAsJSONDecoderDoes(_ literal: String, _ expected: String) throws {
    let text = bytes(#"{"v":"# + literal + "}")
    #expect(DecodingAgreement.check(Box<String>.self, text) == .bothAccepted)
    #expect(try JSONReader.decode(Box<String>.self, from: text).v.utf8.elementsEqual(expected.utf8))
  }

  /// Random strings, escaped in random ways: the same string back, from both.
  @Test func readsRandomlyEscapedStringsBack() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0303)
    for _ in 0..<2000 {
      let string = JSONMutator.randomString(using: &random)
      let text = TestJSON.object([TestJSON.Member("v", .string(string))]).text(
        TestJSON.Style(spacing: 0.3, escaping: 0.4), using: &random)
      #expect(DecodingAgreement.check(Box<String>.self, text) == .bothAccepted)
      #expect(try JSONReader.decode(Box<String>.self, from: text).v.utf8.elementsEqual(string.utf8))
    }
  }

  /// The first of duplicate keys wins, in objects and dictionaries, as in `JSONDecoder`; a later duplicate is
  /// not even decoded (its syntax is checked); keys are compared as strings, so `é` written two ways is one
  /// key, spelled as first written.
  @Test(arguments: [
    #"{"v":1,"v":2}"#, #"{"v":1,"v":[1]}"#, #"{"v":[1],"v":2}"#, #"{"v":null,"v":1}"#, #"{"v":1,"v":null}"#,
    #"{"v":{"a":1,"a":"x"}}"#, #"{"v":{"a":"x","a":1}}"#, #"{"v":{"\u00e9":1,"e\u0301":2}}"#,
    #"{"v":{"e\u0301":1,"\u00e9":2}}"#, #"{"v":{"a":1,"a":1e400}}"#, #"{"\u0076":7}"#,
    #"{"v\u0000":1,"v":2}"#,
  ])
  func duplicateKeysGoAsInJSONDecoder(_ text: String) {
    let agreed: (DecodingAgreement.Outcome) -> Bool = {
      switch $0 {
      case .bothAccepted, .bothRefused: true
      default: false
      }
    }
    let asInteger = DecodingAgreement.check(Box<UInt64>.self, bytes(text))
    let asDictionary = DecodingAgreement.check(Box<[String: UInt64]>.self, bytes(text))
    let asOptional = DecodingAgreement.check(OptionalBox<UInt64>.self, bytes(text))
    #expect(agreed(asInteger), "\(asInteger)")
    #expect(agreed(asDictionary), "\(asDictionary)")
    #expect(agreed(asOptional), "\(asOptional)")
  }

  /// Semantic errors are worded as `JSONDecoder` words them, with the same path (JSONBodies.describe's).
  @Test(arguments: [
    (#"{"x":1}"#, "Box<String>", #"missing field "v""#),
    (#"{"v":1}"#, "Box<String>", "at v: Expected to decode String but found number instead."),
    (#"{"v":true}"#, "Box<String>", "at v: Expected to decode String but found bool instead."),
    (#"{"v":[]}"#, "Box<String>", "at v: Expected to decode String but found an array instead."),
    (#"{"v":{}}"#, "Box<String>", "at v: Expected to decode String but found a dictionary instead."),
    (#"{"v":null}"#, "Box<String>", "at v: Cannot get value of type String -- found null value instead"),
    (#"{"v":null}"#, "Box<UInt64>", "at v: Cannot get value of type UInt64 -- found null value instead"),
    (#"{"v":"1"}"#, "Box<UInt64>", "at v: Expected to decode UInt64 but found a string instead."),
    (#"{"v":null}"#, "Box<Bool>", "at v: Expected to decode Bool but found null instead."),
    (#"{"v":1}"#, "Box<Bool>", "at v: Expected to decode Bool but found number instead."),
    (#"{"v":null}"#, "Box<Double>", "at v: Cannot get value of type Double -- found null value instead"),
    (#"{"v":"x"}"#, "Box<Int>", "at v: Expected to decode Int but found a string instead."),
    (
      #"{"v":[]}"#, "Box<[String: UInt64]>",
      "at v: Expected to decode Dictionary<String, Any> but found an array instead."
    ),
    (
      #"{"v":null}"#, "Box<[String: UInt64]>",
      "at v: Cannot get keyed decoding container -- found null value instead"
    ),
    (
      #"{"v":{"a":null}}"#, "Box<[String: UInt64]>",
      "at v.a: Cannot get value of type UInt64 -- found null value instead"
    ),
    (
      #"{"v":{"3":"x"}}"#, "Box<[String: UInt64]>",
      "at v[3]: Expected to decode UInt64 but found a string instead."
    ),
    (
      #"{"v":{"+5":"x"}}"#, "Box<[String: UInt64]>",
      "at v[5]: Expected to decode UInt64 but found a string instead."
    ),
    (
      #"{"v":{"a b":true}}"#, "Box<[String: String]>",
      "at v.a b: Expected to decode String but found bool instead."
    ),
    ("42", "Box<String>", "Expected to decode Dictionary<String, Any> but found number instead."),
    ("[1,2]", "Box<String>", "Expected to decode Dictionary<String, Any> but found an array instead."),
    (#""x""#, "Box<String>", "Expected to decode Dictionary<String, Any> but found a string instead."),
    ("null", "Box<String>", "Cannot get keyed decoding container -- found null value instead"),
    (#"{"v":"a","v":1}"#, "Box<UInt64>", "at v: Expected to decode UInt64 but found a string instead."),
  ])
  func wordsTypeErrorsAsJSONDecoderDoes(_ text: String, _ type: String, _ message: String) {
    let outcome: DecodingAgreement.Outcome =
      switch type {
      case "Box<String>": DecodingAgreement.check(Box<String>.self, bytes(text))
      case "Box<UInt64>": DecodingAgreement.check(Box<UInt64>.self, bytes(text))
      case "Box<Bool>": DecodingAgreement.check(Box<Bool>.self, bytes(text))
      case "Box<Double>": DecodingAgreement.check(Box<Double>.self, bytes(text))
      case "Box<Int>": DecodingAgreement.check(Box<Int>.self, bytes(text))
      case "Box<[String: UInt64]>": DecodingAgreement.check(Box<[String: UInt64]>.self, bytes(text))
      default: DecodingAgreement.check(Box<[String: String]>.self, bytes(text))
      }
    #expect(outcome == .bothRefused(foundation: message, strict: message))
  }

  /// A member the type does not read may hold any strict JSON; one that is not strict JSON is refused, although
  /// `JSONDecoder` lets it pass (it parses only what it decodes).
  @Test(
    arguments: [
      (#"{"v":"a","x":[1,]}"#, true), (#"{"v":"a",}"#, true), (#"{"v":"a","x":01}"#, true),
      (#"{"v":"a","x":-}"#, true), (#"{"v":"a","x":1.}"#, true), (#"{"v":"a","x":"\x"}"#, true),
      (#"{"v":"a","x":"\ud800"}"#, true), ("{\"v\":\"a\",\"x\":\"\t\"}", true),
      (#"{"v":"a","x":{"\x":1}}"#, true),
      (#"{"v":"a","x":[1 2]}"#, false), (#"{"v":"a","x":tru}"#, false), (#"{"v":"a","x":1e400}"#, nil),
      (#"{"v":"a","x":[[],{"y":{"z":[null,true,-0.5e-7,"\u00e9"]}}]}"#, nil),
    ] as [(String, Bool?)])
  func checksMembersItDoesNotRead(_ text: String, _ foundationAccepts: Bool?) {
    let outcome = DecodingAgreement.check(Box<String>.self, bytes(text))
    if let foundationAccepts {
      #expect(outcome == .notStrictJSON(foundationAccepted: foundationAccepts))
    } else {
      #expect(outcome == .bothAccepted)
    }
  }

  /// Arbitrary values (any JSON, numbers as doubles), whole and damaged: the two decoders agree.
  @Test func agreesWithJSONDecoderOnArbitraryValues() {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0304)
    var tally = DecodingAgreement.Tally()
    for round in 0..<3000 {
      let value = JSONMutator.randomValue(depth: 4, using: &random)
      let input =
        round % 3 == 0
        ? value.text(.random(using: &random), using: &random) : JSONMutator.mutate(value, using: &random)
      tally.add(DecodingAgreement.check(AnyValue.self, input))
    }
    #expect(tally.disagreements.isEmpty, "\(tally): \(tally.disagreements.prefix(5))")
    #expect(tally.accepted > 500 && tally.notStrict > 500, "\(tally)")
    // Where JSONDecoder looks at every value, only a trailing comma gets past it.
    var lax = DecodingAgreement.Tally()
    for _ in 0..<500 {
      lax.add(
        DecodingAgreement.check(
          AnyValue.self,
          JSONMutator.laxMutate(JSONMutator.randomValue(depth: 3, using: &random), using: &random)))
    }
    #expect(lax.disagreements.isEmpty, "\(lax): \(lax.disagreements.prefix(5))")
    #expect(lax.notStrict == 500 && lax.notStrictButFoundationAccepted > 50, "\(lax)")
  }
}

/// `JSONReader.read`: a reader driven by the caller, which may give up part way.
@Suite struct JSONReaderDrivenTests {
  /// The plain keys of an object whose values are all numbers; nil at the first escaped key.
  private func plainKeys(_ text: String) throws(JSONReadError) -> [String]? {
    let utf8 = Array(text.utf8)
    let result = utf8.withUnsafeBufferPointer { bytes in
      Result { () throws(JSONReadError) -> [String]? in
        try JSONReader.read(bytes) { reader throws(JSONReadError) -> [String]? in
          var keys: [String] = []
          var members = try reader.beginObject()
          while let key = try reader.nextKey(&members) {
            guard let plain = key.plainBytes else { return nil }
            #expect(key.matches("a") == plain.elementsEqual("a".utf8))
            keys.append(String(decoding: plain, as: UTF8.self))
            _ = try reader.readUInt64()
          }
          return keys
        }
      }
    }
    return try result.get()
  }

  @Test func readsWhatTheCallerAsksAndChecksTheEnd() throws {
    #expect(try plainKeys(#" {"a": 1, "bc": 2, "a": 3} "#) == ["a", "bc", "a"])
    #expect(try plainKeys("\u{FEFF}{}") == [])
    // Something after the value is an error, once the caller has read it.
    #expect(throws: JSONReadError.self) { try plainKeys(#"{"a": 1} x"#) }
    // As are the caller's own reads' errors and syntax errors met on the way.
    #expect(throws: JSONReadError.self) { try plainKeys(#"{"a": "1"}"#) }
    #expect(throws: JSONReadError.self) { try plainKeys(#"{"a": 1,}"#) }
  }

  @Test func aCallerThatGivesUpGetsNilAndTheRestIsNotRead() throws {
    // An escaped key ("a" written as \u0061): no plain bytes. The caller gives up; what follows is not read, so
    // even its syntax error is not met.
    #expect(try plainKeys(#"{"b": 1, "\u0061": 2, ]]]"#) == nil)
  }
}
