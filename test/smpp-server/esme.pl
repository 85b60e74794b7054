#!/usr/bin/perl
# A customer's SMPP client (ESME) for the SMPP server's end-to-end tests, on Perl's Net::SMPP (not
# the library the server uses). Connects, then takes control lines on stdin and prints events as
# lines on stdout (k=v fields; binary fields in hex):
#   in:  bind MODE SYSTEM_ID PASSWORD       MODE transmitter|receiver|transceiver
#        submit TAG k=v ...                 src ton dst dton dc esm rd sched valid sm=HEX payload=HEX sar=REF,TOTAL,SEQ
#        query TAG MESSAGE_ID | cancel TAG MESSAGE_ID | enquire | unbind
#        deliverstatus N                    answer the next deliver_sm with command_status N (then 0 again)
#        raw HEX                            write these bytes as they are (malformed PDUs)
#        close                              close the connection
#   out: connected | bind_resp status=.. system_id=.. | submit_resp tag=.. status=.. id=..
#        query_resp tag=.. status=.. id=.. state=.. final=.. | cancel_resp tag=.. status=..
#        enquire_resp status=.. | unbind_resp status=.. | unbind (the server's) | generic_nack status=.. seq=..
#        deliver seq=.. esm=.. dc=.. src=.. dst=.. sm=HEX rmi=.. state=.. | pdu cmd=.. status=.. seq=.. | closed
use strict;
use warnings;
use Net::SMPP;
use IO::Select;
use Getopt::Long;

my ($host, $port) = ('127.0.0.1', 0);
GetOptions('host=s' => \$host, 'port=i' => \$port) or die "bad arguments";
$| = 1;

my $smpp = Net::SMPP->new_connect($host, port => $port, smpp_version => 0x34, async => 1) or die "cannot connect: $!";
print "connected\n";
my $sel = IO::Select->new($smpp, \*STDIN);
my %tags;    # seq -> tag of a submit/query/cancel
my $deliver_status = 0;
my $stdin_buf = '';

sub ev { print join(' ', @_), "\n" }
sub unhex { my $h = shift; return defined $h ? pack('H*', $h) : '' }

sub command {
  my ($line) = @_;
  my ($cmd, @args) = split ' ', $line;
  return unless defined $cmd;
  if ($cmd eq 'bind') {
    my ($mode, $sysid, $pw) = @args;
    my $m = "bind_$mode";
    $smpp->$m(system_id => $sysid, password => $pw, system_type => '', interface_version => 0x34, addr_ton => 0, addr_npi => 0, address_range => '');
  } elsif ($cmd eq 'submit') {
    my $tag = shift @args;
    my %a = map { split /=/, $_, 2 } @args;
    my @opt;
    push @opt, message_payload => unhex($a{payload}) if defined $a{payload};
    if (defined $a{sar}) {
      my ($ref, $total, $seq) = split /,/, $a{sar};
      push @opt, sar_msg_ref_num => pack('n', $ref), sar_total_segments => pack('C', $total), sar_segment_seqnum => pack('C', $seq);
    }
    my $seq = $smpp->submit_sm(
      source_addr_ton => $a{ton} // 1, source_addr_npi => 1, source_addr => $a{src} // '',
      dest_addr_ton => $a{dton} // 1, dest_addr_npi => 1, destination_addr => $a{dst} // '',
      esm_class => $a{esm} // 0, registered_delivery => $a{rd} // 0, data_coding => $a{dc} // 0,
      schedule_delivery_time => $a{sched} // '', validity_period => $a{valid} // '',
      short_message => unhex($a{sm}), @opt);
    $tags{$seq} = $tag;
  } elsif ($cmd eq 'query') {
    my $seq = $smpp->query_sm(message_id => $args[1], source_addr_ton => 0, source_addr_npi => 0, source_addr => '');
    $tags{$seq} = $args[0];
  } elsif ($cmd eq 'cancel') {
    my $seq = $smpp->cancel_sm(message_id => $args[1], service_type => '', source_addr_ton => 0, source_addr_npi => 0, source_addr => '',
      dest_addr_ton => 0, dest_addr_npi => 0, destination_addr => '');
    $tags{$seq} = $args[0];
  } elsif ($cmd eq 'enquire') {
    $smpp->enquire_link();
  } elsif ($cmd eq 'unbind') {
    $smpp->unbind();
  } elsif ($cmd eq 'deliverstatus') {
    $deliver_status = $args[0];
  } elsif ($cmd eq 'raw') {
    $smpp->syswrite(unhex($args[0]));
  } elsif ($cmd eq 'close') {
    $smpp->close();
    ev('closed');
    exit 0;
  }
}

sub pdu_event {
  my ($pdu) = @_;
  my $cmd = $pdu->{cmd};
  my $tag = $tags{$pdu->{seq}} // '';
  if ($cmd == 0x80000009 || $cmd == 0x80000002 || $cmd == 0x80000001) {
    ev('bind_resp', "status=$pdu->{status}", 'system_id=' . ($pdu->{system_id} // ''));
  } elsif ($cmd == 0x80000004) {
    ev('submit_resp', "tag=$tag", "status=$pdu->{status}", 'id=' . ($pdu->{message_id} // ''));
  } elsif ($cmd == 0x80000003) {
    ev('query_resp', "tag=$tag", "status=$pdu->{status}", 'id=' . ($pdu->{message_id} // ''), 'state=' . ($pdu->{message_state} // ''),
      'final=' . ($pdu->{final_date} // ''));
  } elsif ($cmd == 0x80000008) {
    ev('cancel_resp', "tag=$tag", "status=$pdu->{status}");
  } elsif ($cmd == 0x80000015) {
    ev('enquire_resp', "status=$pdu->{status}");
  } elsif ($cmd == 0x80000006) {
    ev('unbind_resp', "status=$pdu->{status}");
  } elsif ($cmd == 0x80000000) {
    ev('generic_nack', "status=$pdu->{status}", "seq=$pdu->{seq}");
  } elsif ($cmd == 0x00000006) {
    ev('unbind');
    $smpp->unbind_resp(seq => $pdu->{seq});
  } elsif ($cmd == 0x00000005) {
    my $rmi = $pdu->{receipted_message_id} // '';
    $rmi =~ s/\0+$//;
    my $state = defined $pdu->{message_state} ? unpack('C', $pdu->{message_state}) : '';
    ev('deliver', "seq=$pdu->{seq}", "esm=$pdu->{esm_class}", "dc=$pdu->{data_coding}", "src=$pdu->{source_addr}",
      "ston=$pdu->{source_addr_ton}", "dst=$pdu->{destination_addr}", 'sm=' . unpack('H*', $pdu->{short_message} // ''), "rmi=$rmi", "state=$state");
    $smpp->deliver_sm_resp(seq => $pdu->{seq}, message_id => '', status => $deliver_status);
    $deliver_status = 0;
  } elsif ($cmd == 0x00000015) {
    $smpp->enquire_link_resp(seq => $pdu->{seq});
  } else {
    ev('pdu', sprintf('cmd=0x%08x', $cmd), "status=$pdu->{status}", "seq=$pdu->{seq}");
  }
}

while (1) {
  for my $fh ($sel->can_read(1)) {
    if ($fh == $smpp) {
      my $pdu = $smpp->read_pdu();
      if (!defined $pdu) {
        ev('closed');
        exit 0;
      }
      pdu_event($pdu);
    } else {
      my $n = sysread(STDIN, my $chunk, 65536);
      exit 0 if !$n;
      $stdin_buf .= $chunk;
      while ($stdin_buf =~ s/^([^\n]*)\n//) { command($1) }
    }
  }
}
