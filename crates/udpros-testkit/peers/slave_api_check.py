#!/usr/bin/env python3
"""Calls every slave API method of a node with Python's xmlrpc.client, from several threads
with keep-alive connections, and prints the replies as one JSON object.

  slave_api_check.py NODE_URI PUBLISHED_TOPIC SUBSCRIBED_TOPIC
"""
import json
import sys
import threading
import xmlrpc.client

uri, published, subscribed = sys.argv[1:4]
calls = {
    'getBusStats': ('/checker',),
    'getBusInfo': ('/checker',),
    'getMasterUri': ('/checker',),
    'getPid': ('/checker',),
    'getSubscriptions': ('/checker',),
    'getPublications': ('/checker',),
    'getUri': ('/checker',),
    'getName': ('/checker',),
    'paramUpdate': ('/checker', '/not/subscribed', 5),
    'paramUpdate_relative': ('/checker', 'relative', 5),
    'publisherUpdate': ('/checker', subscribed, []),
    'publisherUpdate_bad': ('/checker', subscribed, 'not a list'),
    'requestTopic_unknown': ('/checker', '/not_published', [['TCPROS']]),
    'requestTopic_empty': ('/checker', published, []),
    'requestTopic_tcp': ('/checker', published, [['TCPROS']]),
    'requestTopic_none': ('/checker', published, [['SHMROS']]),
    'getPid_arity': ('/checker', 'extra'),
    'getPid_callerid': (7,),
    'shutdown_arity': ('/checker',),
}
results = {}


def call(name, args):
    proxy = xmlrpc.client.ServerProxy(uri)
    method = name.split('_')[0]
    for _ in range(5):  # several calls per keep-alive connection
        try:
            results[name] = getattr(proxy, method)(*args)
        except xmlrpc.client.Fault as f:
            results[name] = {'fault': f.faultCode}


threads = [threading.Thread(target=call, args=item) for item in calls.items()]
for t in threads:
    t.start()
for t in threads:
    t.join()
try:
    xmlrpc.client.ServerProxy(uri).noSuchMethod('/checker')
except xmlrpc.client.Fault as f:
    results['unknown_method'] = {'fault': f.faultCode}
print(json.dumps(results))
