/// What the daemon accepts as a bearer token, from whichever source: the rules in one place, so a token read
/// from a file, printed by a command or handed by an app is held to the same ones.
public enum BearerToken {
  /// Why `text` cannot be a token, or nil if it can: 1 to `maxBytes` visible ASCII characters (it goes in an
  /// `Authorization` header as it is: no space, no control character, nothing a header could be split on).
  public static func problem(with text: some StringProtocol, maxBytes: Int) -> String? {
    if text.isEmpty { return "the token is empty" }
    if text.utf8.count > maxBytes { return "the token is longer than [broker] token_max_bytes (\(maxBytes))" }
    if let bad = text.utf8.first(where: { $0 < 0x21 || $0 > 0x7E }) {
      return "the token holds a byte that is not visible ASCII (0x\(String(bad, radix: 16)))"
    }
    return nil
  }

  /// The token on the first line of `bytes` (a file's contents, a command's output): the line without its
  /// `\n` or `\r\n` and without spaces or tabs around it, checked by `problem(with:maxBytes:)`. Callers read at
  /// most `maxBytes` + 2 bytes: a first line not ended by then is too long, and is refused as such.
  public static func firstLine(of bytes: [UInt8], maxBytes: Int) -> Result<String, TokenReadError> {
    let end = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
    var line = bytes[..<end]
    while let last = line.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") || last == 9 {
      line = line.dropLast()
    }
    while let first = line.first, first == UInt8(ascii: " ") || first == 9 { line = line.dropFirst() }
    if line.isEmpty { return .failure(TokenReadError("no token: the first line is empty")) }
    guard let text = String(validating: line, as: UTF8.self) else {
      return .failure(TokenReadError("the first line is not UTF-8"))
    }
    if let problem = problem(with: text, maxBytes: maxBytes) { return .failure(TokenReadError(problem)) }
    return .success(text)
  }
}

/// Why no token could be read from a source: shown in `status` after the source's name.
public struct TokenReadError: Error, Equatable, CustomStringConvertible {
  public var description: String

  public init(_ description: String) {
    self.description = description
  }
}
