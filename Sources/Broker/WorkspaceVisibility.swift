import BrokerCore
import SyncModel

/// Whether a grant may see each workspace, by the channel index's number for it (a number never changes
/// meaning): the broker asks per page of a subscribe frame or a catch-up, and per subscriber of every page a
/// commit changed, and hashing the workspace's id every time was most of that work. Each workspace's answer is
/// worked out once; forget them all when the grant changes.
struct WorkspaceVisibility {
  private var known: [Bool?] = []

  /// Whether `grant` may see the workspace numbered `number`; `workspace` gives its id the first time (nil: an
  /// id that is not one, which no grant holds).
  mutating func maySee(_ number: ChannelIndex.WorkspaceNumber, _ grant: Grant, _ workspace: () -> EntityID?)
    -> Bool
  {
    let index = Int(number.rawValue)
    if index < known.count, let answer = known[index] { return answer }
    if index >= known.count { known += repeatElement(nil, count: index + 1 - known.count) }
    let answer = workspace().map { grant.workspaces.contains($0) } ?? false
    known[index] = answer
    return answer
  }
}
