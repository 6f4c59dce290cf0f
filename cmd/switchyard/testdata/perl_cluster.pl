#!/usr/bin/perl
# Gearman::Client and Gearman::Worker (libgearman-client-perl) configured
# with every node of a cluster, as an application lists its job servers,
# for e2e_cluster_test.go.
#
#   perl_cluster.pl worker COUNT HOST:PORT...   serves "rev", prints each job, returns after COUNT
#   perl_cluster.pl client COUNT HOST:PORT...   COUNT foreground jobs of "rev", prints each result
use strict;
use warnings;
use Gearman::Client;
use Gearman::Worker;

$| = 1;
my ($mode, $count, @servers) = @ARGV;
die "usage: $0 worker|client COUNT HOST:PORT...\n" unless @servers;
if ($mode eq "worker") {
    my $done = 0;
    my $worker = Gearman::Worker->new(job_servers => \@servers);
    $worker->register_function(rev => sub {
        my $job = shift;
        print "rev ", $job->arg, "\n";
        $done++;
        return scalar reverse $job->arg;
    });
    $worker->work(stop_if => sub { $done >= $count });
    exit 0;
}
my $client = Gearman::Client->new(job_servers => \@servers);
for my $i (1 .. $count) {
    my $r = $client->do_task(rev => "job-$i", { timeout => 20 });
    print defined $r ? "$$r\n" : "undef\n";
}
exit 0;
