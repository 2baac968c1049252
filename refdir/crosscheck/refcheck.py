# Cross-check (not part of the test suite): run the reference Lumina's own analyzers on a reference results
# directory written by refdir.FromResults (go run ./refdir/refgen) and print their verdicts and the latency
# breakdown of every undelivered packet (us), to compare with `lumina analyze DIR --json`.
#
#   usage: python3 refcheck.py LUMINA_CHECKOUT DIR
#
# LUMINA_CHECKOUT is a checkout of github.com/lumina-test/lumina (3df170f was used); its analyzers need dpkt and
# PyYAML (Debian: python3-dpkt, python3-yaml). Its orchestrator modules import paramiko and scp, which the
# analysis does not use: stand-ins are created in a temporary directory.
import sys, os, math, json, yaml, logging, tempfile
stubs = tempfile.mkdtemp()
os.makedirs(os.path.join(stubs, 'paramiko'))
for name, text in {'paramiko/__init__.py': 'AutoAddPolicy = RSAKey = SSHClient = object\n',
                   'paramiko/auth_handler.py': 'class AuthenticationException(Exception): pass\n',
                   'paramiko/ssh_exception.py': 'class SSHException(Exception): pass\nclass NoValidConnectionsError(Exception): pass\n',
                   'scp.py': 'class SCPClient: pass\nclass SCPException(Exception): pass\n'}.items():
    with open(os.path.join(stubs, name), 'w') as f:
        f.write(text)
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, stubs)
logging.disable(logging.CRITICAL)
from lumina.analyzer.pcap_processor.pcap_process import get_packet_list
from lumina.analyzer.checker.integrity_check import IntegrityCheck
from lumina.analyzer.checker.gbn_check import GBNCheck
from lumina.analyzer.checker.read_gbn_check import ReadGBNCheck
from lumina.analyzer.checker.host_check import HostCounterCheck
from lumina.analyzer.counter.switch_counter import SwitchCounter
from lumina.analyzer.counter.host_counter import MLNXHostCounter
from lumina.analyzer.measurer.latency_measure import LatencyMeasure
from lumina.analyzer.main import get_qp_info_list
d = sys.argv[2]
conf = yaml.safe_load(open(d + '/config.yml'))
it = d + '/0/'
pm = {'requester': conf['requester']['nic']['switch-port'], 'responder': conf['responder']['nic']['switch-port'],
      'requester-mirror': conf['requester-mirror']['nic']['switch-port'], 'responder-mirror': conf['responder-mirror']['nic']['switch-port']}
sw = SwitchCounter(it + 'switch-result/switch_state_snapshot.yml', pm)
req = MLNXHostCounter(it + 'rdma-result/requester_counter_start.yml', it + 'rdma-result/requester_counter_finish.yml')
rsp = MLNXHostCounter(it + 'rdma-result/responder_counter_start.yml', it + 'rdma-result/responder_counter_finish.yml')
qps = get_qp_info_list(it + 'switch-result/switch_message_snapshot.yml')
pkts = get_packet_list(it + 'pcap-result/merge.pcap')
pkts.sort(key=lambda x: x.get_switch_seqnum())
ips = lambda h: [x.split('/')[0] for x in conf[h]['nic']['ip-list']]
out = {'integrity': IntegrityCheck(pkts, sw, ips('requester'), ips('responder')).check(),
       'host_discards': HostCounterCheck().check_no_packet_loss(req, rsp)}
t = conf['traffic']; verb = t['rdma-verb']
n = math.ceil(t['message-size'] / t['mtu']) * t['num-msgs-per-qp']
if verb == 'read':
    g = ReadGBNCheck(packet_list=pkts, qp_info_list=qps, num_msgs_per_qp=t['num-msgs-per-qp'], msg_size=t['message-size'], mtu=t['mtu'])
    out['gbn'] = g.check_all_qps(); out['gbn_counters'] = g.check_counters(sender_counter=rsp, receiver_counter=req)
elif verb == 'send_read':  # as the reference's test_gbn splits it: SEND QPs first
    ns = int(str(t['num-qps']).split(',')[0])
    gs = GBNCheck(packet_list=pkts, qp_info_list=qps[:ns], num_data_pkts=n)
    gr = ReadGBNCheck(packet_list=pkts, qp_info_list=qps[ns:], num_msgs_per_qp=t['num-msgs-per-qp'], msg_size=t['message-size'], mtu=t['mtu'])
    out['gbn'] = gs.check_all_qps() and gr.check_all_qps()
    out['gbn_counters'] = gs.check_counters(sender_counter=req, receiver_counter=rsp) and gr.check_counters(sender_counter=rsp, receiver_counter=req)
else:
    g = GBNCheck(packet_list=pkts, qp_info_list=qps, num_data_pkts=n)
    out['gbn'] = g.check_all_qps(); out['gbn_counters'] = g.check_counters(sender_counter=req, receiver_counter=rsp)
us = lambda x: None if x is None else round(x * 1e6, 3)
lost = []
for q in range(len(qps)):
    is_read = verb == 'read' or (verb == 'send_read' and q >= int(str(t['num-qps']).split(',')[0]))
    lm = LatencyMeasure(packet_list=pkts, qp_info_list=[qps[q]], is_read=is_read)
    for p in lm.get_undelivered_pkts(0):
        nack = lm.get_nack(p)
        r = {'qp': q, 'psn_abs': p.get_roce_pkt_seq(), 'retx_us': us(lm.get_retransmit_latency(p)), 'nack': nack is not None}
        if nack is not None:
            r['next_delivered_us'] = us(lm.get_qp_next_delivered_pkt_latency(p))
            r['nack_gen_us'] = us(lm.get_nack_gen_latency(p))
            r['nack_resp_us'] = us(lm.get_nack_resp_latency(p))
        lost.append(r)
out['undelivered'] = lost
print(json.dumps(out))
