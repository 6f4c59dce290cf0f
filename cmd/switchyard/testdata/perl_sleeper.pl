#!/usr/bin/perl
# A Gearman::Worker that overruns its CAN_DO_TIMEOUT, as in p-alik's
# perl-Gearman t/14-sleep.t (e2e_perl_test.go).
#
#   perl_sleeper.pl PORT
#
# Serves "sleep" with a timeout of 1 (gearmand reads it as milliseconds and
# makes it a second): sleeps the argument's seconds, returns "slept", and
# prints "slept" when it has. Runs until killed; Gearman::Worker dies on an
# unexpected ERROR packet, so it exiting is a failure.
use strict;
use warnings;
use Gearman::Worker;

$| = 1;
my ($port) = @ARGV;
die "usage: $0 PORT\n" unless defined $port;
my $worker = Gearman::Worker->new(job_servers => ["127.0.0.1:$port"]);
$worker->register_function(sleep => 1 => sub {
    sleep $_[0]->arg;
    print "slept\n";
    return "slept";
});
$worker->work while 1;
