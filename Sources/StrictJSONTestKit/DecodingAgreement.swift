import FoundationEssentials
import StrictJSON
import Web

/// Decodes the same bytes with `JSONDecoder` and with a type's strict reader, and says whether the two agree as
/// docs/protocol.md ("Strict JSON") promises:
///
/// - a text that is not strict JSON (`TestJSON(parsing:)`, an independent parser, is the oracle) is refused by
///   the strict reader with a syntax error, whatever `JSONDecoder` does with it;
/// - strict JSON is never refused for its syntax, and then both accept it with the same value (compared as
///   sorted-keys `JSONEncoder` bytes, so `-0.0` is not `0.0` and a key's spelling counts), or both refuse it;
///   the one exception is a number `JSONDecoder` rounds into an integer field, which the strict reader refuses
///   as `inexactInteger`.
public enum DecodingAgreement {
  /// What happened to one input.
  public enum Outcome: Equatable, Sendable {
    /// Both decoded it, to the same value.
    case bothAccepted
    /// Both refused it (the messages: `JSONBodies.describe`'s and the strict reader's).
    case bothRefused(foundation: String, strict: String)
    /// Not strict JSON: the strict reader refused it with a syntax error (`JSONDecoder` accepted it or not).
    case notStrictJSON(foundationAccepted: Bool)
    /// `JSONDecoder` rounded a number into an integer field; the strict reader refused it (`inexactInteger`).
    case inexactInteger
    /// A divergence: what differs.
    case disagreement(String)
    /// Not given to `JSONDecoder`, which might trap on it (`mayTrapJSONDecoder`); the strict side read it.
    case foundationSkipped
  }

  /// Whether `bytes` hold a run of more than 100 digits (and points), such as a number `JSONDecoder` may trap on
  /// instead of decoding. Measured with Swift 6.3.1: an integer field holding `9007199254740993`, 150 nines and
  /// `e-149` (166 digits, just above 2^53) stops the process (SIGILL) in the `Decimal` fallback, as do longer ones
  /// near there; every shorter one tried (16 to 165 digits, exponents from 0 to -1000, `Int`, `UInt64`,
  /// `Double`) decoded or failed cleanly. A fuzzer can write such a number, and a trap would end its run with a
  /// crash that is not ours: such inputs go to the strict side only. Digits in strings count too (harmless).
  public static func mayTrapJSONDecoder(_ bytes: [UInt8]) -> Bool {
    var run = 0
    for byte in bytes {
      if (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: ".") {
        run += 1
        if run > 100 { return true }
      } else {
        run = 0
      }
    }
    return false
  }

  /// The outcome of decoding `bytes` both ways as a `T`.
  public static func check<T: Codable & JSONReadable>(_ type: T.Type, _ bytes: [UInt8]) -> Outcome {
    if mayTrapJSONDecoder(bytes) {
      _ = try? JSONReader.decode(T.self, from: bytes)
      return .foundationSkipped
    }
    let foundation: Result<T, any Error> = Result { try JSONDecoder().decode(T.self, from: Data(bytes)) }
    let strict: Result<T, JSONReadError> = Result { () throws(JSONReadError) in
      try JSONReader.decode(T.self, from: bytes)
    }
    let text = String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription
    guard TestJSON.isStrictJSON(bytes) else {
      switch strict {
      case .success(let value):
        return .disagreement("not strict JSON, but the strict reader accepted it as \(value): \(text)")
      case .failure(let error) where !error.isSyntaxError:
        return .disagreement(
          "not strict JSON, but the strict reader's error is not a syntax error: \(error): \(text)")
      case .failure:
        if case .success = foundation { return .notStrictJSON(foundationAccepted: true) }
        return .notStrictJSON(foundationAccepted: false)
      }
    }
    switch (foundation, strict) {
    case (.success(let expected), .success(let actual)):
      return sameValue(expected, actual, text)
    case (.failure(let expected), .failure(let actual)):
      if actual.isSyntaxError {
        return .disagreement("strict JSON refused for its syntax: \(actual): \(text)")
      }
      return .bothRefused(foundation: describe(expected), strict: actual.description)
    case (.success(let expected), .failure(let actual)):
      if actual.kind == .inexactInteger { return .inexactInteger }
      return .disagreement(
        "JSONDecoder accepted \(expected), the strict reader refused it: \(actual): \(text)")
    case (.failure(let expected), .success(let actual)):
      return .disagreement(
        "JSONDecoder refused it (\(describe(expected))), the strict reader read \(actual): \(text)")
    }
  }

  /// Both decoded `text`: `.bothAccepted` if to the same value (as sorted-keys JSON), else what differs.
  static func sameValue<T: Encodable>(_ expected: T, _ actual: T, _ text: String) -> Outcome {
    let expectedBytes = encoded(expected)
    let actualBytes = encoded(actual)
    guard expectedBytes == actualBytes else {
      return .disagreement(
        "different values: JSONDecoder \(String(decoding: expectedBytes, as: UTF8.self)), strict "
          + "\(String(decoding: actualBytes, as: UTF8.self)): \(text)")
    }
    return .bothAccepted
  }

  /// A decoding error as the broker words it (`JSONBodies.describe`).
  public static func describe(_ error: any Error) -> String {
    guard let error = error as? DecodingError else { return "\(error)" }
    return JSONBodies.describe(error)
  }

  /// `value` as sorted-keys JSON.
  public static func encoded(_ value: some Encodable) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return Array((try? encoder.encode(value)) ?? Data("unencodable".utf8))
  }

  /// One round of an agreement test on `tree`: `check` of it rewritten in a random style (respaced and
  /// re-escaped, not respelled: an integer field respelled may be refused as inexact) goes into `whole`, and of
  /// six random damages of it (`JSONMutator`) into `damaged`.
  public static func rewriteAndDamage(
    _ tree: TestJSON, using random: inout some RandomNumberGenerator, whole: inout Tally,
    damaged: inout Tally,
    _ check: ([UInt8]) -> Outcome
  ) {
    var style = TestJSON.Style.random(using: &random)
    style.respelling = 0
    whole.add(check(tree.text(style, using: &random)))
    for _ in 0..<6 { damaged.add(check(JSONMutator.mutate(tree, using: &random))) }
  }

  /// Tallies of outcomes over a run, for a test to check that its inputs reached every kind.
  public struct Tally: CustomStringConvertible, Sendable {
    public var accepted = 0
    public var refused = 0
    public var notStrict = 0
    public var notStrictButFoundationAccepted = 0
    public var inexact = 0
    public var skipped = 0
    public var disagreements: [String] = []

    public init() {}

    public mutating func add(_ outcome: Outcome) {
      switch outcome {
      case .bothAccepted: accepted += 1
      case .bothRefused: refused += 1
      case .notStrictJSON(let foundationAccepted):
        notStrict += 1
        if foundationAccepted { notStrictButFoundationAccepted += 1 }
      case .inexactInteger: inexact += 1
      case .disagreement(let what): disagreements.append(what)
      case .foundationSkipped: skipped += 1
      }
    }

    public var description: String {
      "accepted \(accepted), refused \(refused), not strict JSON \(notStrict) (JSONDecoder accepted "
        + "\(notStrictButFoundationAccepted)), inexact integers \(inexact), not given to JSONDecoder \(skipped), "
        + "disagreements \(disagreements.count)"
    }
  }
}

extension DecodingAgreement {
  /// `check` for `StrictJSONDecoder` (any `Decodable`) instead of a hand-written strict reader: the same
  /// promises, the strict side's syntax and number errors found under its `DecodingError`s. Where both refuse,
  /// the messages are `JSONBodies.describe`'s of each.
  public static func checkDecoder<T: Codable>(_ type: T.Type, _ bytes: [UInt8]) -> Outcome {
    if mayTrapJSONDecoder(bytes) {
      _ = try? StrictJSONDecoder().decode(T.self, from: bytes)
      return .foundationSkipped
    }
    let strict: Result<T, any Error> = Result { try StrictJSONDecoder().decode(T.self, from: bytes) }
    let text = String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription
    guard TestJSON.isStrictJSON(bytes) else {
      let foundationAccepted = (try? JSONDecoder().decode(T.self, from: Data(bytes))) != nil
      switch strict {
      case .success(let value):
        return .disagreement("not strict JSON, but the strict decoder accepted it as \(value): \(text)")
      case .failure(let error):
        guard let readError = StrictJSONDecoder.readError(of: error), readError.isSyntaxError else {
          return .disagreement(
            "not strict JSON, but the strict decoder's error is not a syntax error: \(error): \(text)")
        }
        return .notStrictJSON(foundationAccepted: foundationAccepted)
      }
    }
    let foundation: Result<T, any Error> = Result { try JSONDecoder().decode(T.self, from: Data(bytes)) }
    switch (foundation, strict) {
    case (.success(let expected), .success(let actual)):
      return sameValue(expected, actual, text)
    case (.failure(let expected), .failure(let actual)):
      if let readError = StrictJSONDecoder.readError(of: actual), readError.isSyntaxError {
        return .disagreement("strict JSON refused for its syntax: \(readError): \(text)")
      }
      return .bothRefused(foundation: describe(expected), strict: describe(actual))
    case (.success(let expected), .failure(let actual)):
      if StrictJSONDecoder.readError(of: actual)?.kind == .inexactInteger { return .inexactInteger }
      return .disagreement(
        "JSONDecoder accepted \(expected), the strict decoder refused it: \(describe(actual)): \(text)")
    case (.failure(let expected), .success(let actual)):
      return .disagreement(
        "JSONDecoder refused it (\(describe(expected))), the strict decoder read \(actual): \(text)")
    }
  }
}
