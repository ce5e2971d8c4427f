#if canImport(Glibc)
  import Glibc
#endif

/// A growable byte buffer with a reader and a writer index and value semantics (copy on write).
///
/// Bytes between `readerIndex` and `writerIndex` are the readable bytes. Appending writes at `writerIndex`;
/// reading advances `readerIndex`. The storage is a class, so handing a buffer to several writers (the same
/// notification to a thousand subscribers) shares one allocation; a later mutation through any copy copies first.
///
/// Its own module, below `EventLoop`: the codecs that only move bytes need no event loop (as swift-nio keeps
/// `ByteBuffer` in NIOCore, the loop in NIOPosix).
///
/// Ownership: `ByteStream.write` keeps the storage alive until libuv has finished with it, so the caller may drop
/// or mutate its copy at once.
public struct ByteBuffer: @unchecked Sendable {
  // @unchecked: the storage is only mutated through a uniquely referenced copy (see `reserveForWriting`),
  // so sharing a ByteBuffer across threads shares immutable memory only.

  @usableFromInline
  package final class Storage {
    @usableFromInline package let base: UnsafeMutableRawPointer
    @usableFromInline let capacity: Int

    init(capacity: Int) {
      self.capacity = Swift.max(capacity, 16)
      self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    func copy(from: Int, to: Int, capacity newCapacity: Int) -> Storage {
      let new = Storage(capacity: newCapacity)
      new.base.copyMemory(from: base + from, byteCount: to - from)
      return new
    }

    deinit { base.deallocate() }
  }

  /// `package`: `ByteStream` hands the readable bytes to the kernel without copying them.
  @usableFromInline package var storage: Storage
  /// Index of the first readable byte.
  public private(set) var readerIndex: Int
  /// Index one past the last readable byte; the next append goes here.
  public private(set) var writerIndex: Int

  /// An empty buffer with room for at least `capacity` bytes.
  public init(capacity: Int = 256) {
    storage = Storage(capacity: capacity)
    readerIndex = 0
    writerIndex = 0
  }

  /// An empty buffer that costs its holder no allocation: every copy of it shares one storage, and the first
  /// append gives a copy storage of its own (mutations copy a shared storage first). For what an idle connection
  /// keeps between reads (a receive buffer, a message's fragments), so that it holds no buffer while idle.
  public static let empty = ByteBuffer(capacity: 0)

  /// Whether this buffer's storage is `ByteBuffer.empty`'s, i.e. it holds no allocation of its own (tests).
  public var sharesEmptyStorage: Bool { storage === ByteBuffer.empty.storage }

  /// A buffer holding `bytes`.
  public init(bytes: some Collection<UInt8>) {
    self.init(capacity: bytes.count)
    append(contentsOf: bytes)
  }

  /// A buffer holding the UTF-8 of `string`.
  public init(string: String) {
    self.init(capacity: string.utf8.count)
    append(string: string)
  }

  /// How many bytes can be read.
  @inlinable public var readableBytes: Int { writerIndex - readerIndex }
  /// Whether nothing is readable.
  @inlinable public var isEmpty: Bool { writerIndex == readerIndex }
  /// Bytes the current allocation holds in all.
  public var capacity: Int { storage.capacity }

  /// Makes room for `count` more bytes after `writerIndex`, copying the storage if it is shared or too small.
  @usableFromInline
  mutating func reserveForWriting(_ count: Int) {
    let needed = writerIndex + count
    if isKnownUniquelyReferenced(&storage) {
      if needed <= storage.capacity { return }
      // Reclaim consumed space before growing when that suffices and the move is cheap.
      if readerIndex > 0 && readableBytes + count <= storage.capacity && readableBytes <= storage.capacity / 2
      {
        storage.base.copyMemory(from: storage.base + readerIndex, byteCount: readableBytes)
        writerIndex -= readerIndex
        readerIndex = 0
        return
      }
    }
    var newCapacity = Swift.max(storage.capacity, 16)
    while newCapacity < readableBytes + count { newCapacity *= 2 }
    storage = storage.copy(from: readerIndex, to: writerIndex, capacity: newCapacity)
    writerIndex -= readerIndex
    readerIndex = 0
  }

  /// Appends raw bytes.
  public mutating func append(contentsOf bytes: UnsafeRawBufferPointer) {
    guard bytes.count > 0 else { return }
    reserveForWriting(bytes.count)
    (storage.base + writerIndex).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    writerIndex += bytes.count
  }

  /// Appends the bytes of a collection.
  public mutating func append(contentsOf bytes: some Collection<UInt8>) {
    let done: Void? = bytes.withContiguousStorageIfAvailable {
      append(contentsOf: UnsafeRawBufferPointer($0))
    }
    if done != nil { return }
    reserveForWriting(bytes.count)
    var index = writerIndex
    for byte in bytes {
      storage.base.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
      index += 1
    }
    writerIndex = index
  }

  /// Appends the readable bytes of another buffer.
  public mutating func append(_ other: ByteBuffer) {
    other.withUnsafeReadableBytes { append(contentsOf: $0) }
  }

  /// Appends the UTF-8 of a string.
  public mutating func append(string: String) {
    var string = string
    string.withUTF8 { append(contentsOf: UnsafeRawBufferPointer($0)) }
  }

  /// Appends the UTF-8 of a literal, with no copy of a `String` on the way. (`withUTF8Buffer`, not `utf8Start`,
  /// which traps on a `StaticString` that holds a single scalar rather than UTF-8 bytes.)
  public mutating func append(_ text: StaticString) {
    text.withUTF8Buffer { append(contentsOf: UnsafeRawBufferPointer($0)) }
  }

  /// Appends `value` in decimal ASCII digits ("-" first if negative), without making a `String`.
  public mutating func append(decimal value: Int) {
    // 20 bytes hold Int.min's 19 digits and its sign.
    writeWithUnsafeMutableBytes(minimumWritableBytes: 20) { space in
      var magnitude = value.magnitude
      var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
      return withUnsafeMutableBytes(of: &digits) { scratch in
        var start = scratch.count
        repeat {
          start -= 1
          scratch[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
          magnitude /= 10
        } while magnitude > 0
        if value < 0 {
          start -= 1
          scratch[start] = UInt8(ascii: "-")
        }
        let count = scratch.count - start
        space.copyMemory(from: UnsafeRawBufferPointer(rebasing: scratch[start...]))
        return count
      }
    }
  }

  /// Appends one byte.
  public mutating func append(byte: UInt8) {
    reserveForWriting(1)
    storage.base.storeBytes(of: byte, toByteOffset: writerIndex, as: UInt8.self)
    writerIndex += 1
  }

  /// Appends an integer in network (big-endian) byte order.
  public mutating func append<T: FixedWidthInteger>(bigEndian value: T) {
    reserveForWriting(MemoryLayout<T>.size)
    storage.base.storeBytes(of: value.bigEndian, toByteOffset: writerIndex, as: T.self)
    writerIndex += MemoryLayout<T>.size
  }

  /// Calls `body` with up to `count` bytes of writable space at `writerIndex`; `body` returns how many it wrote.
  public mutating func writeWithUnsafeMutableBytes(
    minimumWritableBytes count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int
  ) rethrows {
    reserveForWriting(count)
    let space = UnsafeMutableRawBufferPointer(
      start: storage.base + writerIndex, count: storage.capacity - writerIndex)
    let written = try body(space)
    precondition(written >= 0 && written <= space.count, "wrote outside the reserved space")
    writerIndex += written
  }

  /// Calls `body` with the readable bytes. The pointer is valid only inside `body`.
  @inlinable
  public func withUnsafeReadableBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    try body(UnsafeRawBufferPointer(start: storage.base + readerIndex, count: readableBytes))
  }

  /// Calls `body` with the readable bytes, writable in place (for unmasking). Copies first if shared.
  public mutating func withUnsafeMutableReadableBytes<R>(
    _ body: (UnsafeMutableRawBufferPointer) throws -> R
  ) rethrows -> R {
    if !isKnownUniquelyReferenced(&storage) {
      storage = storage.copy(from: readerIndex, to: writerIndex, capacity: readableBytes)
      writerIndex -= readerIndex
      readerIndex = 0
    }
    return try body(UnsafeMutableRawBufferPointer(start: storage.base + readerIndex, count: readableBytes))
  }

  /// The readable byte at `offset` from `readerIndex`.
  @inlinable
  public subscript(offset: Int) -> UInt8 {
    precondition(offset >= 0 && offset < readableBytes, "index out of range")
    return storage.base.load(fromByteOffset: readerIndex + offset, as: UInt8.self)
  }

  /// Marks `count` readable bytes as read.
  public mutating func moveReaderIndex(forwardBy count: Int) {
    precondition(count >= 0 && count <= readableBytes, "moved past the readable bytes")
    readerIndex += count
    if readerIndex == writerIndex {
      readerIndex = 0
      writerIndex = 0
    }
  }

  /// Reads and returns `count` bytes, or nil if fewer are readable.
  public mutating func readBytes(_ count: Int) -> [UInt8]? {
    guard count <= readableBytes else { return nil }
    let bytes = Array(UnsafeRawBufferPointer(start: storage.base + readerIndex, count: count))
    moveReaderIndex(forwardBy: count)
    return bytes
  }

  /// A buffer holding `count` readable bytes from `offset` (relative to `readerIndex`), sharing no storage.
  public func slice(from offset: Int, count: Int) -> ByteBuffer {
    precondition(offset >= 0 && count >= 0 && offset + count <= readableBytes, "slice out of range")
    var copy = ByteBuffer(capacity: count)
    copy.append(contentsOf: UnsafeRawBufferPointer(start: storage.base + readerIndex + offset, count: count))
    return copy
  }

  /// Forgets every byte, keeping the allocation when it is not shared.
  public mutating func clear() {
    if !isKnownUniquelyReferenced(&storage) { storage = Storage(capacity: storage.capacity) }
    readerIndex = 0
    writerIndex = 0
  }

  /// The readable bytes as an array.
  public var readableBytesArray: [UInt8] { withUnsafeReadableBytes { Array($0) } }

  /// The readable bytes decoded as UTF-8 (invalid sequences repaired).
  public var readableString: String { withUnsafeReadableBytes { String(decoding: $0, as: UTF8.self) } }
}

extension ByteBuffer: Equatable {
  /// Buffers are equal when their readable bytes are.
  public static func == (lhs: ByteBuffer, rhs: ByteBuffer) -> Bool {
    guard lhs.readableBytes == rhs.readableBytes else { return false }
    return lhs.withUnsafeReadableBytes { a in
      rhs.withUnsafeReadableBytes { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
      }
    }
  }
}

extension ByteBuffer: CustomStringConvertible {
  public var description: String { "ByteBuffer(readable: \(readableBytes), capacity: \(capacity))" }
}
