// swift-tools-version:6.0
// JWT verifications per second, cached and not, HS256 and ES256 (the broker's [[auth.jwt]] path): a package of
// its own so that the main build does not carry it. Run: docs/benchmarks.md, "JWT verification".
import PackageDescription

let package = Package(
  name: "jwt-bench",
  dependencies: [.package(name: "pagesync", path: "../..")],
  targets: [
    .executableTarget(
      name: "jwt-bench",
      dependencies: [
        .product(name: "JSONWebToken", package: "pagesync"), .product(name: "Web", package: "pagesync"),
      ])
  ],
  swiftLanguageModes: [.v6]
)
