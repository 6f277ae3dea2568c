(* T9's homogeneity hypothesis, derived from the network (T02_homogeneous_rescaling's `net`): with σ
   positively homogeneous of degree k and zero biases from layer l on, the network's output is
   positively homogeneous of degree k^(m−l) in W_l, m − 1 = the number of hidden layers after layer l:
     F(c·W_l) = c^(k^(depth N + 1)) F(W_l)   for every c > 0,
   for the network plug C (Layer W_l 0 N) of any depth and widths (C: the layers before l, any biases;
   N: the layers after l, with `unbiased N`: every bias zero; `depth N`: its number of hidden layers).
   - `eval_hom`: an unbiased network N is positively homogeneous of degree k^(depth N) in its input;
   - `T9_net_homogeneous`: the degree-k^(depth N + 1) law in the hidden layer's weight W_l;
   - `T9_net_homogeneous_out`: the output layer's weight, degree 1 (= k⁰), no hypothesis on σ;
   - `T9_net_instance`: σ(z) = z² (k = 2) meets the hypothesis, the net z |-> z² |-> z (one hidden layer
     after layer 1) is unbiased with depth 1, and doubling W_1 = 1 multiplies the output at x = 1 by
     2^(2²) = 16. *)
From mathcomp Require Import all_ssreflect all_algebra.
From CoupledCurvature Require Import Defs T02_homogeneous_rescaling.

Section Homogeneity.
Variable R : rcfType.

(* the number of hidden layers of a network *)
Fixpoint depth i o (N : net R i o) : nat :=
  match N with
  | Out _ _ _ _ => 0%N
  | Layer _ _ _ _ _ N' => (depth N').+1
  end.

(* every bias of the network is zero *)
Fixpoint unbiased i o (N : net R i o) : Prop :=
  match N with
  | Out _ _ _ b => b = 0
  | Layer _ _ _ _ b N' => b = 0 /\ unbiased N'
  end.

Variable sigma : R -> R.
Variable k : nat.
Hypothesis sigma_hom : forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z.

Lemma map_sigma_scale h (s : R) (z : 'cV[R]_h) : 0 < s ->
  map_mx sigma (s *: z) = s ^+ k *: map_mx sigma z.
Proof. by move=> s0; apply/matrixP => p q; rewrite !mxE sigma_hom. Qed.

Lemma eval_hom i o (N : net R i o) (s : R) (y : 'cV[R]_i) : unbiased N -> 0 < s ->
  eval sigma N (s *: y) = s ^+ (k ^ depth N) *: eval sigma N y.
Proof.
elim: N s y => [i' o' W b|i' h' o' W b N' IH] s y /=.
  by move=> -> s0; rewrite !addr0 expn0 expr1 scalemxAr.
case=> -> uN s0; rewrite !addr0 -scalemxAr map_sigma_scale // IH ?exprn_gt0 //.
by rewrite -exprM -expnS.
Qed.

Theorem T9_net_homogeneous j i h o (C : ctx R j i) (W : 'M[R]_(h, i)) (N : net R h o) (c : R)
    (x : 'cV[R]_j) :
  unbiased N -> 0 < c ->
  eval sigma (plug C (Layer (c *: W) 0 N)) x
  = c ^+ (k ^ (depth N).+1) *: eval sigma (plug C (Layer W 0 N)) x.
Proof.
move=> uN c0; rewrite !eval_plug /= !addr0 -scalemxAl map_sigma_scale // eval_hom ?exprn_gt0 //.
by rewrite -exprM -expnS.
Qed.

End Homogeneity.

Theorem T9_net_homogeneous_out (R : rcfType) (sigma : R -> R) j i o (C : ctx R j i)
    (W : 'M[R]_(o, i)) (c : R) (x : 'cV[R]_j) :
  eval sigma (plug C (Out (c *: W) 0)) x = c *: eval sigma (plug C (Out W 0)) x.
Proof. by rewrite !eval_plug /= !addr0 scalemxAl. Qed.

Section Instance.
Variable R : rcfType.

Definition sq (z : R) : R := z ^+ 2.
(* after layer 1: one hidden layer z |-> z², then the output layer, all weights 1, biases 0 *)
Definition hom_N : net R 1 1 := Layer 1%:M 0 (Out 1%:M 0).

Theorem T9_net_instance :
  [/\ forall c z : R, 0 < c -> sq (c * z) = c ^+ 2 * sq z, unbiased hom_N, depth hom_N = 1%N,
      eval sq (Layer 1%:M 0 hom_N) 1%:M = 1%:M
    & eval sq (Layer (2 *: 1%:M) 0 hom_N) 1%:M = 16%:R *: eval sq (Layer 1%:M 0 hom_N) 1%:M].
Proof.
have h1 : eval sq (Layer 1%:M 0 hom_N) 1%:M = 1%:M.
  by apply/matrixP => p q; rewrite !(ord1 p) !(ord1 q) /= !mul1mx !addr0 !mxE /sq !expr1n.
split => //; first by move=> c z _; rewrite /sq exprMn.
rewrite h1; apply/matrixP => p q; rewrite !(ord1 p) !(ord1 q) /= !mul1mx !addr0 !mxE /sq.
rewrite big_ord1 !mxE /=.
by rewrite !mulr1 -exprM -natrX.
Qed.

End Instance.
