/// Reads a fuzzer's input as a sequence of small choices: the same bytes always make the same choices, and an
/// exhausted input answers zero, so every input is a valid program for a structured target.
public struct FuzzBytes {
  private let bytes: UnsafeRawBufferPointer
  private var offset = 0

  public init(_ bytes: UnsafeRawBufferPointer) {
    self.bytes = bytes
  }

  /// Whether every byte was read.
  public var isAtEnd: Bool { offset >= bytes.count }

  /// The next byte (0 when the input is exhausted).
  public mutating func byte() -> UInt8 {
    guard offset < bytes.count else { return 0 }
    defer { offset += 1 }
    return bytes[offset]
  }

  /// A number below `bound` (> 0).
  public mutating func below(_ bound: Int) -> Int { Int(byte()) % bound }

  /// One of `choices` (not empty).
  public mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

  /// A 64-bit number from the next eight bytes.
  public mutating func uint64() -> UInt64 {
    (0..<8).reduce(0) { value, _ in value << 8 | UInt64(byte()) }
  }

  /// Up to `maxCount` bytes as text (any bytes: invalid UTF-8 is repaired as Swift's decoding repairs it).
  public mutating func text(maxCount: Int) -> String {
    let count = below(maxCount + 1)
    let end = Swift.min(bytes.count, offset + count)
    defer { offset = Swift.max(offset, end) }
    guard offset < end else { return "" }
    return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self)
  }

  /// The bytes not read yet.
  public mutating func rest() -> [UInt8] {
    guard offset < bytes.count else { return [] }
    defer { offset = bytes.count }
    return Array(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
  }
}
