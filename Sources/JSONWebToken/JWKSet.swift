import StrictJSON

/// A JSON Web Key Set (RFC 7517 section 5) read into verification keys: `{"keys": [JWK, …]}` with RSA (`n`,
/// `e`), EC P-256 (`crv`, `x`, `y`), OKP Ed25519 (`crv`, `x`) and `oct` (`k`, HS256) keys. A key whose `use`
/// is `enc` is skipped (it does not sign); a key whose `alg` is not the algorithm its type verifies is an
/// error, as is any key that cannot be used, so a typo never silently drops a key.
public enum JWKSet {
  /// The keys of `json`, or an error naming the key (by index and `kid`) and the problem.
  public static func keys(from json: [UInt8]) throws(JWTKeyError) -> [JWTKey] {
    let members: [[String: String]]
    do {
      members =
        try json.withUnsafeBufferPointer { bytes throws(JSONReadError) in
          try JSONReader.read(bytes) { reader throws(JSONReadError) in
            var found: [[String: String]]?
            var object = try reader.beginObject()
            while let key = try reader.nextKey(&object) {
              guard key.matches("keys"), found == nil else {
                try reader.skipValue()
                continue
              }
              var list: [[String: String]] = []
              var elements = try reader.beginArray()
              while try reader.nextElement(&elements) { list.append(try stringMembers(&reader)) }
              found = list
            }
            return found ?? []
          }
        } ?? []
    } catch {
      throw JWTKeyError("not a JWK Set: \(error)")
    }
    var keys: [JWTKey] = []
    var seen: Set<String> = []
    for (index, member) in members.enumerated() {
      let name = "key \(index)" + (member["kid"].map { " (kid \"\($0)\")" } ?? "")
      if member["use"] == "enc" { continue }
      do throws(JWTKeyError) {
        let key = try self.key(member)
        if let kid = key.id, !seen.insert(kid).inserted { throw JWTKeyError("its kid is used twice") }
        keys.append(key)
      } catch {
        throw JWTKeyError("\(name): \(error.description)")
      }
    }
    if keys.isEmpty { throw JWTKeyError("the JWK Set has no signing key") }
    return keys
  }

  private static func key(_ member: [String: String]) throws(JWTKeyError) -> JWTKey {
    func bytes(_ name: String) throws(JWTKeyError) -> [UInt8] {
      guard let text = member[name] else { throw JWTKeyError("\"\(name)\" is missing") }
      guard let bytes = Base64URL.decode(Array(text.utf8)) else {
        throw JWTKeyError("\"\(name)\" is not base64url")
      }
      return bytes
    }
    let id = member["kid"]
    let key: JWTKey
    switch member["kty"] {
    case "RSA": key = try JWTKey(rsaModulus: bytes("n"), exponent: bytes("e"), id: id)
    case "EC":
      guard member["crv"] == "P-256" else { throw JWTKeyError("an EC key must have \"crv\": \"P-256\"") }
      key = try JWTKey(p256X: bytes("x"), y: bytes("y"), id: id)
    case "OKP":
      guard member["crv"] == "Ed25519" else { throw JWTKeyError("an OKP key must have \"crv\": \"Ed25519\"") }
      key = try JWTKey(ed25519: bytes("x"), id: id)
    case "oct": key = try JWTKey(secret: bytes("k"), id: id)
    case let other?: throw JWTKeyError("\"kty\": \"\(other)\" is not RSA, EC, OKP or oct")
    case nil: throw JWTKeyError("\"kty\" is missing")
    }
    if let alg = member["alg"], alg != key.algorithm.rawValue {
      throw JWTKeyError("\"alg\": \"\(alg)\" is not what its key verifies (\(key.algorithm.rawValue))")
    }
    return key
  }

  /// An object's string members (the first of duplicates); members of other types are skipped.
  private static func stringMembers(_ reader: inout JSONReader) throws(JSONReadError) -> [String: String] {
    var out: [String: String] = [:]
    var object = try reader.beginObject()
    while let key = try reader.nextKey(&object) {
      let name = key.string
      if try reader.peek() == .string, out[name] == nil {
        out[name] = try reader.readString()
      } else {
        try reader.skipValue()
      }
    }
    return out
  }
}
