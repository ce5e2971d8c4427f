/// Web: HTTP/1.1 and WebSocket (RFC 6455), server and client, over EventLoop. See docs/architecture.md.
@_exported import EventLoop
