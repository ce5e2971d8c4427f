/// A number as scanned: where its parts are. The grammar is checked; the value is not computed yet.
@usableFromInline struct NumberToken {
  var start: Int
  var end: Int
  var negative: Bool
  /// The digits before the point (at least one).
  var integerDigits: Range<Int>
  /// The digits after the point (empty without a fraction).
  var fractionDigits: Range<Int>
  /// The exponent's value, held within ±1,000,000 (enough to know that any more is out of range).
  var exponent: Int
  var hasExponent: Bool

  /// `-?[0-9]+`: read exactly, as `JSONDecoder` reads it.
  var isPlainInteger: Bool { fractionDigits.isEmpty && !hasExponent }
  var digitCount: Int { integerDigits.count + fractionDigits.count }
}

extension JSONReader {
  /// Reads an unsigned 64-bit integer. Written plainly (`123`) it may be any value up to 2^64-1, and `-0` is 0;
  /// written with a fraction or an exponent (`1.0`, `1e2`) it must be a whole number below 2^53, exactly.
  /// Another value is a type mismatch, `null` a missing value.
  public mutating func readUInt64() throws(JSONReadError) -> UInt64 {
    let token = try readNumberToken(typeName: "UInt64")
    if token.isPlainInteger {
      guard let magnitude = plainMagnitude(token), !token.negative || magnitude == 0 else {
        throw doesNotFit(token, as: UInt64.self)
      }
      return magnitude
    }
    guard let magnitude = exactWholeMagnitude(token), !token.negative || magnitude == 0 else {
      throw doesNotFit(token, as: UInt64.self)
    }
    return magnitude
  }

  /// Reads an `Int` (64-bit), as `readUInt64` reads, down to -2^63.
  public mutating func readInt() throws(JSONReadError) -> Int {
    let token = try readNumberToken(typeName: "Int")
    let limit = token.negative ? UInt64(Int.max) + 1 : UInt64(Int.max)
    guard
      let magnitude = token.isPlainInteger ? plainMagnitude(token) : exactWholeMagnitude(token),
      magnitude <= limit
    else {
      throw doesNotFit(token, as: Int.self)
    }
    return token.negative ? Int(bitPattern: UInt(0 &- magnitude)) : Int(magnitude)
  }

  /// Reads a `Double`: the nearest double to the decimal number (as `strtod` rounds). A number whose magnitude
  /// rounds to infinity, or to zero when it is not zero, is out of range (`JSONDecoder` refuses both).
  public mutating func readDouble() throws(JSONReadError) -> Double {
    let token = try readNumberToken(typeName: "Double")
    // Clinger's fast path: a significand of at most 2^53 and a power of ten up to 10^22 are both exact
    // doubles, and one multiplication or division of exact values rounds correctly.
    var significand: UInt64 = 0
    var significantDigits = 0
    for index in digitIndices(token) {
      let digit = UInt64(bytes[index] &- UInt8(ascii: "0"))
      if significantDigits > 0 || digit != 0 {
        significantDigits += 1
        if significantDigits > 19 { break }
        significand = significand &* 10 &+ digit
      }
    }
    if significantDigits == 0 { return token.negative ? -0.0 : 0.0 }
    let scale = token.exponent - token.fractionDigits.count
    if significantDigits <= 19 && significand <= 1 << 53 && scale >= -22 && scale <= 22 {
      let magnitude =
        scale >= 0
        ? Double(significand) * Self.powersOfTen[scale] : Double(significand) / Self.powersOfTen[-scale]
      return token.negative ? -magnitude : magnitude
    }
    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), as: UTF8.self)
    guard let value = Double(text), value.isFinite, value != 0 else {
      throw JSONReadError(
        .numberOutOfRange, "the number \(text.prefix(40)) is out of a double's range", at: token.start)
    }
    return value
  }

  private static let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19,
    1e20, 1e21, 1e22,
  ]

  /// The next number's token; another value is a type mismatch, `null` a missing value (as `JSONDecoder`
  /// says them for `typeName`).
  private mutating func readNumberToken(typeName: String) throws(JSONReadError) -> NumberToken {
    let kind = try peek()
    guard kind == .number else {
      if kind == .null { throw .nullValue(expected: typeName, at: position) }
      throw .typeMismatch(expected: typeName, found: kind, at: position)
    }
    return try scanNumber()
  }

  /// Scans the number at `position`, checking its grammar, and reads past it.
  @usableFromInline mutating func scanNumber() throws(JSONReadError) -> NumberToken {
    let start = position
    let count = bytes.count
    let negative = bytes[position] == UInt8(ascii: "-")
    if negative { position += 1 }
    let integerStart = position
    guard position < count, Self.isDigit(bytes[position]) else {
      throw .syntax("invalid number: a digit must follow '-'", at: start)
    }
    if bytes[position] == UInt8(ascii: "0") {
      position += 1
      if position < count && Self.isDigit(bytes[position]) {
        throw .syntax("invalid number: a leading zero", at: start)
      }
    } else {
      while position < count && Self.isDigit(bytes[position]) { position += 1 }
    }
    let integerDigits = integerStart..<position
    var fractionDigits = position..<position
    if position < count && bytes[position] == UInt8(ascii: ".") {
      position += 1
      let fractionStart = position
      while position < count && Self.isDigit(bytes[position]) { position += 1 }
      guard position > fractionStart else {
        throw .syntax("invalid number: a digit must follow '.'", at: start)
      }
      fractionDigits = fractionStart..<position
    }
    var exponent = 0
    var hasExponent = false
    if position < count && (bytes[position] | 0x20) == UInt8(ascii: "e") {
      hasExponent = true
      position += 1
      var exponentNegative = false
      if position < count && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")) {
        exponentNegative = bytes[position] == UInt8(ascii: "-")
        position += 1
      }
      let exponentStart = position
      while position < count && Self.isDigit(bytes[position]) {
        exponent = min(exponent * 10 + Int(bytes[position] - UInt8(ascii: "0")), 1_000_000)
        position += 1
      }
      guard position > exponentStart else {
        throw .syntax("invalid number: a digit must follow the exponent's 'e'", at: start)
      }
      if exponentNegative { exponent = -exponent }
    }
    // Nothing that could continue a number may follow it (`1.2.3`, `1e5e5`, `12a`): say so here, rather than
    // let the container complain about a missing comma.
    if position < count {
      let next = bytes[position]
      if Self.isLetterOrDigit(next) || next == UInt8(ascii: ".") || next == UInt8(ascii: "+")
        || next == UInt8(ascii: "-")
      {
        throw .syntax("invalid number", at: start)
      }
    }
    return NumberToken(
      start: start, end: position, negative: negative, integerDigits: integerDigits,
      fractionDigits: fractionDigits, exponent: exponent, hasExponent: hasExponent)
  }

  /// The magnitude of a plain integer, or nil beyond 2^64-1.
  private func plainMagnitude(_ token: NumberToken) -> UInt64? {
    var value: UInt64 = 0
    for index in token.integerDigits {
      let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(bytes[index] &- UInt8(ascii: "0")))
      if overflow1 || overflow2 { return nil }
      value = sum
    }
    return value
  }

  /// The magnitude of a number written with a fraction or an exponent when it is exactly a whole number below
  /// 2^53 (where a double holds every whole number, so `JSONDecoder` reads the same value); else nil.
  private func exactWholeMagnitude(_ token: NumberToken) -> UInt64? {
    let indices = digitIndices(token)
    // The significant digits, first to last non-zero: their value times 10^scale is the number.
    guard let first = indices.firstIndex(where: { bytes[$0] != UInt8(ascii: "0") }) else { return 0 }
    let last = indices.lastIndex(where: { bytes[$0] != UInt8(ascii: "0") })!
    let trailingZeros = indices.count - 1 - last
    let scale = token.exponent - token.fractionDigits.count + trailingZeros
    let significantCount = last - first + 1
    guard scale >= 0, significantCount + scale <= 16 else { return nil }
    var value: UInt64 = 0
    for position in first...last {
      value = value * 10 + UInt64(bytes[indices[position]] &- UInt8(ascii: "0"))
    }
    for _ in 0..<scale { value *= 10 }
    return value < 1 << 53 ? value : nil
  }

  /// The offsets of the digits before and after the point, in order.
  private func digitIndices(_ token: NumberToken) -> DigitIndices {
    DigitIndices(integer: token.integerDigits, fraction: token.fractionDigits)
  }

  /// Why `token` does not fit `type`: `inexactInteger` where `JSONDecoder` would have read it (through a
  /// rounded double: a fraction or exponent that is not exactly whole, or whole but from 2^53 up), else
  /// `numberDoesNotFit` (negative, fractional or too large for it too).
  private func doesNotFit<T: FixedWidthInteger>(_ token: NumberToken, as type: T.Type) -> JSONReadError {
    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), as: UTF8.self)
    if !token.isPlainInteger, let double = Double(text), T(exactly: double) != nil {
      return JSONReadError(
        .inexactInteger,
        "an integer written with a fraction or an exponent must be exactly a whole number below 2^53 "
          + "(\(text.prefix(40)))", at: token.start)
    }
    return JSONReadError(
      .numberDoesNotFit, "a number does not fit its field (negative, fractional or too large)",
      at: token.start)
  }

  static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

/// The offsets of a number's digits, those before the point then those after it, as one collection.
private struct DigitIndices: RandomAccessCollection {
  let integer: Range<Int>
  let fraction: Range<Int>
  var startIndex: Int { 0 }
  var endIndex: Int { integer.count + fraction.count }
  subscript(position: Int) -> Int {
    position < integer.count ? integer.lowerBound + position : fraction.lowerBound + position - integer.count
  }
}
