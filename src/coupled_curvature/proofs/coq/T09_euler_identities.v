(* T9, the Euler identities for a loss positively homogeneous of degree k in a block:
     L(s·x) = s^k L(x) for every s > 0 and x
   gives, at a point w,
     wᵀg = k·L(w)       (euler_radial: the radial derivative d1 L w w = k L(w), with no
                         differentiability at all; euler_wg: wᵀ grad L w = k L(w) when L is
                         differentiable at w)
     H w = (k − 1)·g    (euler_Hw: L differentiable near w, its partials derivable at w).
   For a bias-free MLP with degree-1 activation, the loss is homogeneous of degree p = k^{m-l}
   in W_l along the ray with the activation pattern fixed (SPEC T9); the closed forms in P and Q
   that the SymPy derivation states follow from these two identities and are not restated here.
   Instance: L(v) = v₀² (k = 2) at w = 1, where g = 2 <> 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T03_network_law.

Section T9.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Definition homogeneous (k : nat) (L : V -> R^o) :=
  forall (s : R) (x : V), 0 < s -> L (s *: x) = s ^+ k * L x.

Lemma fmap_near_eq (f g : R^o -> R^o) :
  (\forall h \near (0 : R^o)^', f h = g h) -> f @ (0 : R^o)^' = g @ (0 : R^o)^'.
Proof.
move=> E; apply/funext => P; apply/propext; split => /=.
  by move=> HP; apply: (@filterS2 _ _ _ _ _ _ _ E HP) => h /= <-.
by move=> HP; apply: (@filterS2 _ _ _ _ _ _ _ E HP) => h /= ->.
Qed.

(* the derivative of s |-> s^k at 1 *)
Lemma derive_pow1 (k : nat) : derive (fun s : R^o => (s ^+ k : R^o)) 1 1 = k%:R.
Proof.
case: k => [|k].
  have -> : (fun s : R^o => (s ^+ 0 : R^o)) = cst 1 by apply/funext => s; rewrite expr0.
  by rewrite derive_val.
have F m : (fun s : R^o => (s ^+ m : R^o)) = (@id R^o) ^+ m.
  elim: m => [|m IH]; apply/funext => s; first by rewrite expr0.
  by rewrite !exprS -IH.
rewrite F.
rewrite deriveX ?derive_id; last exact: derivable_id.
rewrite derive_val.
change (((k.+1)%:R * (1 : R) ^+ k) * (1 : R) = (k.+1)%:R :> R).
by rewrite expr1n !mulr1.
Qed.

(* wᵀg = k L(w) in directional form: no differentiability needed *)
Theorem euler_radial (k : nat) (L : V -> R^o) (w : V) :
  homogeneous k L -> d1 L w w = k%:R * L w.
Proof.
move=> HL; rewrite /d1 /derive.
set q := fun h : R => h^-1 *: (((fun s : R^o => (s ^+ k : R^o)) \o shift 1) (h *: 1) - 1 ^+ k).
have E : \forall h \near (0 : R^o)^',
    h^-1 *: ((L \o shift w) (h *: w) - L w) = (fun y : R^o => (L w * y : R^o)) (q h).
  move: (near0_gt1 R); apply: filterS => h h1 /=.
  have -> : h *: w + w = (h + 1) *: w by rewrite scalerDl scale1r.
  rewrite HL // /q /= !regular_scaleE mulr1 expr1n -[X in _ - X]mul1r -mulrBl.
  by rewrite mulrA mulrC.
rewrite (fmap_near_eq E).
have [->|L0] := eqVneq (L w) 0.
  rewrite mulr0; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
  by apply: nearW => h /=; rewrite mul0r.
change (lim ((fun y : R^o => (L w * y : R^o)) @ (q @ (0 : R^o)^')) = k%:R * L w).
by rewrite lim_mulr // -derive_pow1 mulrC.
Qed.

Corollary euler_wg (k : nat) (L : V -> R^o) (w : V) :
  homogeneous k L -> differentiable L w -> dot w (grad L w) = k%:R * L w.
Proof. by move=> HL dL; rewrite /dot -derive_grad // (euler_radial _ HL). Qed.

(* H w = (k − 1) g *)
Theorem euler_Hw (k : nat) (L : V -> R^o) (w : V) :
  homogeneous k L -> differentiable_near L w -> partials_derivable L w ->
  hess L w *m w = (k%:R - 1) *: grad L w.
Proof.
move=> HL dL dD; apply/matrixP => i b; rewrite ord1.
have := derive_radial i dL dD.
have -> : (fun y : V => (d1 L y y : R^o)) = k%:R \*: L.
  by apply/funext => y; rewrite (euler_radial _ HL).
rewrite deriveZ; last exact/diff_derivable/(nbhs_singleton dL).
rewrite regular_scaleE -/(d1 L (e i) w) [X in _ = _ + X]mxE => /eqP.
by rewrite -subr_eq -{2}[d1 L (e i) w]mul1r -mulrBl => /eqP <-; rewrite !mxE.
Qed.

End T9.

(* the instance: L(v) = v₀² on R¹ is homogeneous of degree 2, differentiable near w = 1, its
   partial 2v₀ is derivable, and g = 2 <> 0 (so wᵀg = 2 = 2·L(w) and Hw = 2 = (2 − 1)·g) *)
Theorem T9_instance (R : realType) :
  let L : matrix_normedModType R 0 0 -> R^o := fun v => v 0 0 ^+ 2 in
  let w : matrix_normedModType R 0 0 := const_mx 1 in
  [/\ homogeneous 2 L, differentiable_near L w,
      partials_derivable L w &
      grad L w = (2%:R : R)%:M].
Proof.
move=> L w; have EL : L = @sq0 R by apply/funext => v; rewrite /L expr2.
split.
- by move=> s x _; rewrite /L mxE exprMn.
- by rewrite /differentiable_near; near=> y; rewrite EL; apply: differentiableM; exact: differentiable_coord.
- move=> i j; rewrite EL (ord1 j) sq0_d1; apply/diff_derivable.
  by apply: differentiableZ; exact: differentiable_coord.
- apply/matrixP => i b; rewrite !ord1 !mxE eqxx mulr1n EL.
  have := congr1 (fun f => f w) (@sq0_d1 R); rewrite /= => ->.
  by change ((2%:R : R) * w 0 0 = 2%:R); rewrite mxE mulr1.
Unshelve. all: by end_near.
Qed.
