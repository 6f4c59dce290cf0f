#!/usr/bin/perl
# A Gearman::Client (libgearman-client-perl) client for the end-to-end tests
# (e2e_perl_test.go).
#
#   perl_client.pl PORT do               do_task rev at normal, high, low
#   perl_client.pl PORT bg FUNC DATA     dispatch_background, then get_status
#   perl_client.pl PORT status HANDLE    get_status
#   perl_client.pl PORT fail             do_task of a job the worker fails
#   perl_client.pl PORT taskset N        N tasks in one taskset
#   perl_client.pl PORT server-status    get_job_server_status ("status")
#   perl_client.pl PORT sleep N          do_task sleep N (perl_sleeper.pl)
use strict;
use warnings;
use Gearman::Client;

$| = 1;
my ($port, $mode, @args) = @ARGV;
die "usage: $0 PORT MODE [ARGS]\n" unless defined $mode;
my $client = Gearman::Client->new(job_servers => ["127.0.0.1:$port"]);

sub status_line {
    my ($handle) = @_;
    my $st = $client->get_status($handle);
    return "status: none\n" unless $st;
    return sprintf("status: known=%d running=%d\n", $st->known ? 1 : 0, $st->running ? 1 : 0);
}

if ($mode eq 'do') {
    for my $c (['normal', 'hello', {}], ['high', 'high', {priority => 'high'}],
        ['low', 'low', {priority => 'low'}], ['uniq', 'uniq', {uniq => 'perl-uniq'}]) {
        my ($label, $arg, $opts) = @$c;
        my $res = $client->do_task('rev', $arg, $opts);
        print "$label: ", (defined $res ? $$res : 'undef'), "\n";
    }
} elsif ($mode eq 'bg') {
    my ($func, $data) = @args;
    my $handle = $client->dispatch_background($func, $data, {uniq => "bg-$data"});
    die "dispatch_background failed\n" unless defined $handle;
    print "handle: $handle\n";
    print status_line($handle);
} elsif ($mode eq 'status') {
    print status_line($args[0]);
} elsif ($mode eq 'fail') {
    my $failed = 0;
    my $res = $client->do_task('fail', 'x', {on_fail => sub { $failed++ }});
    print "fail: ", (defined $res ? $$res : 'undef'), " on_fail=$failed\n";
} elsif ($mode eq 'sleep') {
    my $res = $client->do_task('sleep', $args[0]);
    print "sleep: ", (defined $res ? $$res : 'undef'), "\n";
} elsif ($mode eq 'taskset') {
    my $n = $args[0];
    my %res;
    my $ts = $client->new_task_set;
    for my $i (0 .. $n - 1) {
        my $arg = sprintf('task-%03d', $i);
        $ts->add_task('rev', $arg, {
            on_complete => sub { $res{$arg} = ${ $_[0] } },
            on_fail     => sub { $res{$arg} = 'FAILED: ' . ($_[0] // '') },
        });
    }
    $ts->wait(timeout => 20);
    for my $i (0 .. $n - 1) {
        my $arg = sprintf('task-%03d', $i);
        print "$arg: ", ($res{$arg} // '(none)'), "\n";
    }
} elsif ($mode eq 'server-status') {
    my $st = $client->get_job_server_status;
    for my $js (sort keys %$st) {
        for my $f (sort keys %{ $st->{$js} }) {
            my $s = $st->{$js}{$f};
            print "$f queued=$s->{queued} running=$s->{running} capable=$s->{capable}\n";
        }
    }
} else {
    die "unknown mode $mode\n";
}
