"""Throughput through the SQS endpoint with boto3 beside mqlite's own wire, in one run,
from one Python process with the same HTTP client library (urllib3, which boto3 uses):
N single sends, then the drain (receive 10, delete the 10 in one batch call).

    bash benches/sqs/run.sh [N]        # builds the release broker, serves it, runs this

argv: the broker's endpoint, N, and optionally an administrator token (then boto3 signs
every request and the wire sends the bearer token)."""

import base64
import json
import sys
import time

import boto3
import urllib3

endpoint, n = sys.argv[1], int(sys.argv[2])
token = sys.argv[3] if len(sys.argv) > 3 else None
http = urllib3.PoolManager(maxsize=1)
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = f"Bearer {token}"


def wire(method, body):
    r = http.request("POST", f"{endpoint}/mqlite.v1.{method}", body=json.dumps(body),
                     headers=headers)
    if r.status != 200:
        raise SystemExit(f"{method}: {r.status} {r.data[:200]}")
    return json.loads(r.data or b"{}")


def timed(label, run):
    start = time.perf_counter()
    run()
    rate = n / (time.perf_counter() - start)
    print(json.dumps({"path": label, "messages": n, "per_second": round(rate)}))


sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                   aws_access_key_id="admin" if token else "x",
                   aws_secret_access_key=token or "x")
body = "x" * 256
url = sqs.create_queue(QueueName="bench-sqs")["QueueUrl"]
raw_url = sqs.create_queue(QueueName="bench-raw")["QueueUrl"]
wire("AdminService/CreateQueue", {"name": "bench-wire"})
b64 = base64.b64encode(body.encode()).decode()


def sqs_send():
    for _ in range(n):
        sqs.send_message(QueueUrl=url, MessageBody=body)


def sqs_drain():
    left = n
    while left > 0:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        left -= len(got)


def raw_sqs_send():
    # The same SQS requests without the SDK (auth off only): the protocol's own cost.
    for _ in range(n):
        r = http.request("POST", f"{endpoint}/", body=json.dumps(
            {"QueueUrl": raw_url, "MessageBody": body}), headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.SendMessage"})
        if r.status != 200:
            raise SystemExit(f"SendMessage: {r.status} {r.data[:200]}")


def wire_send():
    for _ in range(n):
        wire("QueueService/Send", {"queue": "bench-wire", "messages": [{"body": b64}]})


def wire_drain():
    left = n
    while left > 0:
        got = wire("QueueService/Receive", {"queue": "bench-wire", "max_messages": 10})["messages"]
        wire("QueueService/CompleteBatch", {"queue": "bench-wire", "messages": [
            {"seq_number": m["seq_number"], "lock_token": m["lock_token"]} for m in got]})
        left -= len(got)


timed("sqs: SendMessage, one at a time", sqs_send)
timed("wire: Send, one at a time", wire_send)
if not token:
    timed("sqs without the SDK (urllib3): SendMessage, one at a time", raw_sqs_send)
timed("sqs: ReceiveMessage 10 + DeleteMessageBatch", sqs_drain)
timed("wire: Receive 10 + CompleteBatch", wire_drain)
