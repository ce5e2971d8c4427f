import Daemon

_ = DaemonConfiguration()
