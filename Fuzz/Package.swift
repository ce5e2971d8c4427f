// swift-tools-version:6.0
// libFuzzer targets for the decoders that face the network. A package of its own because these executables
// only link with -sanitize=fuzzer. Build and run: `make fuzz` (docs/architecture.md, "Testing").
import PackageDescription

let package = Package(
  name: "pagesync-fuzz",
  dependencies: [.package(name: "pagesync", path: "..")],
  targets: [
    .target(name: "FuzzSupport"),
    .executableTarget(
      name: "FuzzHTTPRequest", dependencies: ["FuzzSupport", .product(name: "Web", package: "pagesync")]),
    .executableTarget(
      name: "FuzzWebSocketFrames", dependencies: ["FuzzSupport", .product(name: "Web", package: "pagesync")]),
  ],
  swiftLanguageModes: [.v6]
)
