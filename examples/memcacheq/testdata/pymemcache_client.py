"""Debian's python3-pymemcache against memcacheq, run by clients_test.go.

usage: pymemcache_client.py MODE HOST PORT; prints one JSON line.
The client keeps pymemcache's defaults: sets are sent with noreply.
"""
import json
import sys
import time

from pymemcache.client.base import Client


def text(v):
    return None if v is None else v.decode()


def main():
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Client((host, port), connect_timeout=10, timeout=10)
    if mode == "noreply":
        # The lost job1: refused noreply sets, then a set and gets.
        c.set("big", b"x" * 2000)  # over -max-value
        c.set("a/b", b"v")  # not a queue name
        c.set("jobs", b"job1")  # stored
        c.set("jobs", b"job2")  # the queue is full (-capacity 1)
        print(json.dumps([text(c.get("jobs")), text(c.get("jobs"))]))
    elif mode == "open":
        # Take an item tentatively, say which, and wait to be killed.
        print(json.dumps(text(c.get("jobs/open"))), flush=True)
        time.sleep(60)
    elif mode == "drain":
        # Kestrel's reliable loop: close the last item, open the next.
        got = []
        while True:
            v = c.get("jobs/t=200/close/open")
            if v is None:
                break
            got.append(text(v))
        c.get("jobs/close")
        print(json.dumps(got))
    else:
        sys.exit("unknown mode " + mode)


main()
