"""What the Python integration tests share: free loopback ports.

Each script puts tests/ on sys.path and imports from here."""
import socket

_ISSUED = set()


def free_port():
    """A free loopback port, never one this process was given before (a
    port just released can come back from bind(0) at once)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ISSUED:
            _ISSUED.add(port)
            return port
