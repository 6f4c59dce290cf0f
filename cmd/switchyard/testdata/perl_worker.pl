#!/usr/bin/perl
# A Gearman::Worker (libgearman-client-perl) worker for the end-to-end tests
# (e2e_perl_test.go).
#
#   perl_worker.pl PORT COUNT
#
# Serves "rev" (reverses the argument) and "fail" (fails the job), prints
# "<function> <argument>" for each job, and returns after COUNT jobs.
use strict;
use warnings;
use Gearman::Worker;

$| = 1;
my ($port, $count) = @ARGV;
die "usage: $0 PORT COUNT\n" unless defined $count;
my $done = 0;
my $worker = Gearman::Worker->new(job_servers => ["127.0.0.1:$port"]);
$worker->register_function(rev => sub {
    my $job = shift;
    print "rev ", $job->arg, "\n";
    $done++;
    return scalar reverse $job->arg;
});
$worker->register_function(fail => sub {
    my $job = shift;
    print "fail ", $job->arg, "\n";
    $done++;
    return undef;    # WORK_FAIL
});
$worker->work(stop_if => sub { $done >= $count });
exit 0;
