#if canImport(Glibc)
  import Glibc
#endif

extension ConfigReader {
  /// Reads and parses the configuration file at `path`; an unreadable file is a `ConfigError` naming it and why.
  public convenience init(contentsOf path: String) throws(ConfigError) {
    let bytes: [UInt8]
    do {
      bytes = try readConfiguredFile(path)
    } catch {
      throw ConfigError(file: path, line: nil, key: "", message: error.message)
    }
    try self.init(text: String(decoding: bytes, as: UTF8.self), file: path)
  }
}

/// Why `readConfiguredFile` could not read a file: "cannot read the file: No such file or directory", "the file
/// is larger than 1048576 bytes".
public struct ConfiguredFileError: Error, Sendable {
  public var message: String
}

/// The bytes of a file the configuration is or names (the file itself, a key, a JWK Set), read whole with
/// blocking calls (at start and at a reload); refused past `limit` bytes.
public func readConfiguredFile(_ path: String, limit: Int = Int.max) throws(ConfiguredFileError) -> [UInt8] {
  guard let file = fopen(path, "rb") else {
    throw ConfiguredFileError(message: "cannot read the file: \(String(cString: strerror(errno)))")
  }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = fread(&chunk, 1, chunk.count, file)
    if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
    if bytes.count > limit { throw ConfiguredFileError(message: "the file is larger than \(limit) bytes") }
    if count < chunk.count { break }
  }
  return bytes
}
