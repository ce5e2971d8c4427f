/// The pure parts of the WebSocket opening handshake (RFC 6455 section 4): the key and its accept value.
public enum WebSocketHandshake {
  /// The fixed GUID the accept value is derived with.
  public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
  /// The only `Sec-WebSocket-Version` this implementation speaks.
  public static let supportedVersion = "13"

  /// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`: base64(sha1(key + guid)).
  public static func acceptValue(forKey key: String) -> String {
    Base64.encode(Crypto.sha1((key + guid).utf8))
  }

  /// Whether `key` is a valid `Sec-WebSocket-Key`: base64 that decodes to exactly 16 bytes.
  public static func isValidKey(_ key: String) -> Bool {
    Base64.decode(key)?.count == 16
  }

  /// A fresh `Sec-WebSocket-Key` for a client: 16 random bytes, base64.
  public static func makeKey() -> String {
    Base64.encode(Crypto.randomBytes(16))
  }
}
