#!/usr/bin/perl
# A scripted SMSC for the SMPP carrier's end-to-end tests, on Perl's Net::SMPP (not the library
# the carrier uses). One ESME at a time (a new connection closes the last), or with --multi any
# number side by side (the bench of a carrier's Tps across processes: answers at once only; the
# commands that send to the ESME go to the one heard from last). Control lines on stdin, events
# as lines on stdout:
#   in:  idformat hex|dec|hex0       how message ids are written in submit_sm_resp
#        throttle N                  answer the next N submit_sm with ESME_RTHROTTLED
#        reject N STATUS             answer the next N submit_sm with STATUS (decimal)
#        silent N                    do not answer the next N submit_sm
#        early N                     send the next N submits' receipts before their submit_sm_resp
#        delay MS                    answer each accepted submit_sm MS ms after it came (0: at once)
#        deliver k=v ...             send a deliver_sm (sm=hex of short_message, tlv_rmi=, tlv_state=)
#        redeliver MS                a deliver_sm answered with an error status is sent again MS ms
#                                    later, until answered with 0 (as an SMSC retries; 0: never)
#        drop                        close the ESME's connection
#        flood N RATE [mo]           send N receipts (esm_class 4, TLVs) for unknown ids flood1.., RATE per
#                                    second (mo: N MO "flood mo K" from 4477000K to 447700900998);
#                                    their answers are counted, not printed (see stats)
#        stats                       print the flood's counts
#        corrupt LEN                 write a PDU header whose command_length is LEN (decimal) and no body
#        prereceipt N STAT ERR           send text receipts (stat:STAT err:ERR) for the next N ids this SMSC
#                                    will issue, before it has issued them (as a confused SMSC does)
#   out: listening PORT | bind system_id=.. ok=1|0 | submit seq=.. id=.. k=v ... t=SECONDS sm=HEX answer=..
#        (answer=delayed also gives outstanding=N: accepted submit_sm not answered yet, this one included)
#        deliver_resp seq=.. status=.. | redelivered seq=.. of=.. | enquire_link | closed
#        flood_sent n=.. seconds=.. | stats sent=.. ok=.. err=.. | corrupt_sent len=..
use strict;
use warnings;
use Net::SMPP;
use IO::Select;
use Getopt::Long;
use Time::HiRes qw(time);

my ($port, $sysid, $password, $multi) = (0, 'switchboard', 'secret', 0);
GetOptions('port=i' => \$port, 'system-id=s' => \$sysid, 'password=s' => \$password, 'multi' => \$multi) or die "bad arguments";
my %conns;    # --multi: every connected ESME, by file number
$| = 1;

my $listen = Net::SMPP->new_listen('127.0.0.1', port => $port, smpp_version => 0x34, async => 1)
  or die "cannot listen: $!";
print "listening ", $listen->sockport, "\n";

my $sel = IO::Select->new($listen, \*STDIN);
my ($client, $idformat, $throttle, $reject_n, $reject_status, $silent, $early) = (undef, 'hex', 0, 0, 0, 0, 0);
my $stdin_buf = '';
my ($delay_ms, $redeliver_ms, $unanswered) = (0, 0, 0);
my @timed;         # [when (epoch seconds), code]: delayed answers and redeliveries, soonest first
my %deliveries;    # deliver_sm seq -> its arguments, until answered with status 0
my %held;    # deliver_sm seq -> [submit seq, id]: submit_sm_resp sent once the early receipt is answered
my $next_id = 0x1A2B00;
# The flood: how many to send, at what rate, since when; its deliver_sm seqs until answered.
my ($flood_n, $flood_rate, $flood_start, $flood_sent, $flood_ok, $flood_err, $flood_mo) = (0, 0, 0, 0, 0, 0, 0);
my %flood;

sub ev { print join(' ', @_), "\n" }

sub close_client {
  return unless $client;
  delete $conns{fileno $client};
  $sel->remove($client);
  close $client;
  $client = undef;
  # What was owed to that connection is gone with it (a new bind starts afresh).
  @timed = ();
  %deliveries = ();
  %flood = ();
  $flood_n = 0;
  $unanswered = 0;
  ev('closed');
}

sub later {
  my ($ms, $code) = @_;
  @timed = sort { $a->[0] <=> $b->[0] } @timed, [time + $ms / 1000, $code];
}

sub send_deliver {
  my (@args) = @_;
  my $seq = $client->deliver_sm(@args, async => 1);
  $deliveries{$seq} = \@args;
  return $seq;
}

sub fmtid {
  my ($n) = @_;
  return sprintf('%X', $n) if $idformat eq 'hex';
  return sprintf('%012X', $n) if $idformat eq 'hex0';
  return "$n";
}

sub msgid { return fmtid($next_id++); }

sub handle_pdu {
  my ($pdu) = @_;
  my $cmd = $pdu->{cmd};
  if ($cmd == 0x00000009) {    # bind_transceiver
    my $ok = ($pdu->{system_id} eq $sysid && $pdu->{password} eq $password) ? 1 : 0;
    $client->set_version(0x34);
    ev('bind', "system_id=$pdu->{system_id}", "system_type=$pdu->{system_type}", "ok=$ok");
    $client->bind_transceiver_resp(system_id => 'PERLSMSC', seq => $pdu->{seq}, status => $ok ? 0 : 0x0E);
  } elsif ($cmd == 0x00000004) {    # submit_sm
    my @f = map { "$_=" . (defined $pdu->{$_} ? $pdu->{$_} : '') }
      qw(source_addr_ton source_addr_npi source_addr dest_addr_ton dest_addr_npi destination_addr esm_class data_coding registered_delivery);
    push @f, sprintf('t=%.6f', time);    # when the SMSC read it (its clock, seconds)
    my $sm = unpack('H*', $pdu->{short_message} // '');
    if ($silent > 0) { $silent--; ev('submit', "seq=$pdu->{seq}", 'id=-', @f, "sm=$sm", 'answer=none'); return; }
    if ($throttle > 0) {
      $throttle--;
      ev('submit', "seq=$pdu->{seq}", 'id=-', @f, "sm=$sm", 'answer=throttled');
      $client->submit_sm_resp(message_id => '', seq => $pdu->{seq}, status => 0x58);
      return;
    }
    if ($reject_n > 0) {
      $reject_n--;
      ev('submit', "seq=$pdu->{seq}", 'id=-', @f, "sm=$sm", "answer=$reject_status");
      $client->submit_sm_resp(message_id => '', seq => $pdu->{seq}, status => $reject_status);
      return;
    }
    my $id = msgid();
    if ($early > 0) {
      # The receipt first; the submit_sm_resp only once the ESME answered it (so it was kept).
      $early--;
      my $dseq = $client->deliver_sm(source_addr_ton => 1, source_addr_npi => 1, source_addr => $pdu->{destination_addr},
        dest_addr_ton => 1, dest_addr_npi => 1, destination_addr => $pdu->{source_addr}, esm_class => 4, data_coding => 0,
        short_message => "id:$id sub:001 dlvrd:001 submit date:2611241200 done date:2611241200 stat:DELIVRD err:000 text:", async => 1);
      $held{$dseq} = [$pdu->{seq}, $id];
      ev('submit', "seq=$pdu->{seq}", "id=$id", @f, "sm=$sm", 'answer=after-receipt');
      return;
    }
    if ($delay_ms > 0) {
      $unanswered++;
      ev('submit', "seq=$pdu->{seq}", "id=$id", @f, "sm=$sm", 'answer=delayed', "outstanding=$unanswered");
      my $seq = $pdu->{seq};
      later($delay_ms, sub { $unanswered--; $client->submit_sm_resp(message_id => $id, seq => $seq); });
      return;
    }
    ev('submit', "seq=$pdu->{seq}", "id=$id", @f, "sm=$sm", 'answer=ok');
    $client->submit_sm_resp(message_id => $id, seq => $pdu->{seq});
  } elsif ($cmd == 0x00000015) {    # enquire_link
    ev('enquire_link');
    $client->enquire_link_resp(seq => $pdu->{seq});
  } elsif ($cmd == 0x00000006) {    # unbind
    $client->unbind_resp(seq => $pdu->{seq});
    close_client();
  } elsif ($cmd == 0x80000005 && delete $flood{$pdu->{seq}}) {    # a flood receipt's deliver_sm_resp
    if ($pdu->{status} == 0) { $flood_ok++ } else { $flood_err++ }
  } elsif ($cmd == 0x80000005) {    # deliver_sm_resp
    ev('deliver_resp', "seq=$pdu->{seq}", "status=$pdu->{status}");
    my $args = delete $deliveries{$pdu->{seq}};
    if ($args && $pdu->{status} != 0 && $redeliver_ms > 0) {
      my $of = $pdu->{seq};
      later($redeliver_ms, sub { my $seq = send_deliver(@$args); ev('redelivered', "seq=$seq", "of=$of"); });
    }
    if (my $h = delete $held{$pdu->{seq}}) { $client->submit_sm_resp(message_id => $h->[1], seq => $h->[0]); }
  } elsif ($cmd & 0x80000000) {
    # other responses: nothing to do
  } else {
    $client->generic_nack(seq => $pdu->{seq}, status => 0x03);
  }
}

sub command {
  my ($line) = @_;
  chomp $line;
  my ($verb, @args) = split /\s+/, $line;
  return unless defined $verb;
  if ($verb eq 'idformat') { $idformat = $args[0]; }
  elsif ($verb eq 'throttle') { $throttle = $args[0]; }
  elsif ($verb eq 'reject') { ($reject_n, $reject_status) = @args; }
  elsif ($verb eq 'silent') { $silent = $args[0]; }
  elsif ($verb eq 'early') { $early = $args[0]; }
  elsif ($verb eq 'delay') { $delay_ms = $args[0]; }
  elsif ($verb eq 'redeliver') { $redeliver_ms = $args[0]; }
  elsif ($verb eq 'drop') { close_client(); }
  elsif ($verb eq 'flood') {
    ($flood_n, $flood_rate, $flood_start, $flood_sent, $flood_ok, $flood_err) = ($args[0], $args[1], time, 0, 0, 0);
    $flood_mo = ($args[2] // '') eq 'mo' ? 1 : 0;
  }
  elsif ($verb eq 'stats') { ev('stats', "sent=$flood_sent", "ok=$flood_ok", "err=$flood_err"); }
  elsif ($verb eq 'corrupt') {
    return ev('error', 'no client') unless $client;
    # An enquire_link header with an impossible length and nothing after it.
    $client->syswrite(pack('NNNN', $args[0], 0x00000015, 0, 0x7FFF0001));
    ev('corrupt_sent', "len=$args[0]");
  }
  elsif ($verb eq 'prereceipt') {
    return ev('error', 'no client') unless $client;
    my ($n, $stat, $err) = @args;
    for my $i (0 .. $n - 1) {
      my $id = fmtid($next_id + $i);
      my $seq = send_deliver(source_addr_ton => 1, source_addr_npi => 1, source_addr => '', dest_addr_ton => 1, dest_addr_npi => 1,
        destination_addr => '', esm_class => 4, data_coding => 0,
        short_message => "id:$id sub:001 dlvrd:000 submit date:2611241200 done date:2611241200 stat:$stat err:$err text:");
      ev('prereceipt', "seq=$seq", "id=$id");
    }
  }
  elsif ($verb eq 'deliver') {
    return ev('error', 'no client') unless $client;
    my %a = map { split /=/, $_, 2 } @args;
    my @tlv;
    push @tlv, receipted_message_id => "$a{tlv_rmi}\0" if defined $a{tlv_rmi};
    push @tlv, message_state => pack('C', $a{tlv_state}) if defined $a{tlv_state};
    my $seq = send_deliver(
      source_addr_ton => $a{source_addr_ton} // 1, source_addr_npi => 1, source_addr => $a{source_addr} // '',
      dest_addr_ton => $a{dest_addr_ton} // 1, dest_addr_npi => 1, destination_addr => $a{destination_addr} // '',
      esm_class => $a{esm_class} // 0, data_coding => $a{data_coding} // 0,
      short_message => pack('H*', $a{sm} // ''), @tlv);
    ev('delivered', "seq=$seq");
  }
}

# Sends the flood's receipts due by now (a blocking write waits while the ESME reads no more).
sub flood_step {
  return unless $client && $flood_sent < $flood_n;
  my $due = int((time - $flood_start) * $flood_rate) + 1;
  $due = $flood_n if $due > $flood_n;
  while ($flood_sent < $due) {
    $flood_sent++;
    my $seq = $flood_mo
      ? $client->deliver_sm(source_addr_ton => 1, source_addr_npi => 1, source_addr => sprintf('4477000%05d', $flood_sent),
        dest_addr_ton => 1, dest_addr_npi => 1, destination_addr => '447700900998', esm_class => 0, data_coding => 0,
        short_message => "flood mo $flood_sent", async => 1)
      : $client->deliver_sm(source_addr_ton => 1, source_addr_npi => 1, source_addr => '447700900999',
        dest_addr_ton => 1, dest_addr_npi => 1, destination_addr => '447700900998', esm_class => 4, data_coding => 0,
        short_message => '', receipted_message_id => "flood$flood_sent\0", message_state => pack('C', 2), async => 1);
    $flood{$seq} = 1;
  }
  ev('flood_sent', "n=$flood_sent", sprintf('seconds=%.3f', time - $flood_start)) if $flood_sent == $flood_n;
}

while (1) {
  my $wait = @timed ? $timed[0][0] - time : undef;
  $wait = 0 if defined $wait && $wait < 0;
  $wait = 0.005 if $client && $flood_sent < $flood_n && (!defined $wait || $wait > 0.005);
  for my $fh ($sel->can_read($wait)) {
    if ($fh == $listen) {
      my $c = $listen->accept or next;
      if ($multi) {
        $conns{fileno $c} = $c;
        $c->set_version(0x34);
        $sel->add($c);
        ev('connected');
        next;
      }
      close_client() if $client;
      $client = $c;
      $client->set_version(0x34);
      $sel->add($client);
      ev('connected');
    } elsif ($fh == \*STDIN) {
      # sysread, not <STDIN>: a buffered read would hide the next lines from select.
      my $n = sysread(STDIN, $stdin_buf, 65536, length $stdin_buf);
      exit 0 unless $n;
      while ($stdin_buf =~ s/^([^\n]*)\n//) { command($1); }
    } elsif ($multi && $conns{fileno $fh}) {
      $client = $conns{fileno $fh};
      my $pdu = $client->read_pdu();
      if (!$pdu) { close_client(); next; }
      handle_pdu($pdu);
    } elsif ($client && $fh == $client) {
      my $pdu = $client->read_pdu();
      if (!$pdu) { close_client(); next; }
      handle_pdu($pdu);
    }
  }
  while (@timed && $timed[0][0] <= time) { (shift @timed)->[1]->(); }
  flood_step();
}
