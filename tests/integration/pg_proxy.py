"""pg_proxy.py - a TCP relay from a loopback port to PostgreSQL, so that a
test can make one replica's path to the server go silent (SIGSTOP this
process: the kernel still accepts and acknowledges, nothing answers) while
other replicas reach the server directly.
Usage: pg_proxy.py LISTEN_PORT TARGET_PORT PORT_FILE"""
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    target = int(sys.argv[2])
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", int(sys.argv[1])))
    lst.listen(64)
    with open(sys.argv[3], "w") as f:
        f.write(str(lst.getsockname()[1]))
    while True:
        c, _ = lst.accept()
        try:
            u = socket.create_connection(("127.0.0.1", target))
        except OSError:
            c.close()
            continue
        for a, b in ((c, u), (u, c)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


main()
