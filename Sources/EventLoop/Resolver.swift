import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// Host-name resolution through libuv's thread pool (`uv_getaddrinfo`).
enum Resolver {
  /// Resolves `host` asynchronously; `completion` runs on the loop thread with the addresses in the system's
  /// preferred order.
  static func resolve(
    loop: Loop, host: String, port: Int,
    _ completion: @escaping (Result<[sockaddr_storage], LoopError>) -> Void
  ) {
    let request = Request(host: host, completion: completion)
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    let result = uv_getaddrinfo(
      loop.uv, request.request,
      { req, status, info in
        let request = Unmanaged<Request>.fromOpaque(req!.pointee.data).takeRetainedValue()
        request.finish(status, info)
      }, host, String(port), &hints)
    if result < 0 {
      Unmanaged.passUnretained(request).release()
      request.finish(result, nil)
    }
  }

  /// Resolves `host` on the calling thread (for listening at start-up, where blocking is acceptable).
  static func resolveNow(loop: Loop, host: String, port: Int) throws(LoopError) -> sockaddr_storage {
    let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
    defer { request.deallocate() }
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_PASSIVE
    let result = uv_getaddrinfo(loop.uv, request, nil, host, String(port), &hints)
    if result < 0 { throw LoopError(code: result, operation: "resolve \(host)") }
    defer { uv_freeaddrinfo(request.pointee.addrinfo) }
    guard let first = addresses(request.pointee.addrinfo).first else {
      throw LoopError(code: Int32(UV_EAI_NONAME.rawValue), operation: "resolve \(host)")
    }
    return first
  }

  static func addresses(_ info: UnsafeMutablePointer<addrinfo>?) -> [sockaddr_storage] {
    var result: [sockaddr_storage] = []
    var node = info
    while let current = node {
      if let addr = current.pointee.ai_addr,
        current.pointee.ai_family == AF_INET || current.pointee.ai_family == AF_INET6
      {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
          raw.copyMemory(from: UnsafeRawBufferPointer(start: addr, count: Int(current.pointee.ai_addrlen)))
        }
        result.append(storage)
      }
      node = current.pointee.ai_next
    }
    return result
  }

  private final class Request {
    let request: UnsafeMutablePointer<uv_getaddrinfo_t> = .allocate(capacity: 1)
    let host: String
    let completion: (Result<[sockaddr_storage], LoopError>) -> Void

    init(host: String, completion: @escaping (Result<[sockaddr_storage], LoopError>) -> Void) {
      self.host = host
      self.completion = completion
      request.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    deinit { request.deallocate() }

    func finish(_ status: Int32, _ info: UnsafeMutablePointer<addrinfo>?) {
      defer { if let info { uv_freeaddrinfo(info) } }
      if status < 0 {
        completion(.failure(LoopError(code: status, operation: "resolve \(host)")))
        return
      }
      let list = Resolver.addresses(info)
      if list.isEmpty {
        completion(.failure(LoopError(code: Int32(UV_EAI_NONAME.rawValue), operation: "resolve \(host)")))
      } else {
        completion(.success(list))
      }
    }
  }
}
